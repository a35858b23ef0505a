"""SimpleLLMFunc's ``hooks.abort`` module: :class:`~simplellmfunc.AbortSignal` and the name of
the per-call keyword argument that takes it (``agent(msg, _abort_signal=signal)``)."""

from .._abort import AbortSignal

__all__ = ["ABORT_SIGNAL_PARAM", "AbortSignal"]

ABORT_SIGNAL_PARAM = "_abort_signal"
