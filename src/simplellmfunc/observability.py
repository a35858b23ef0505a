"""SimpleLLMFunc's ``observability`` module. There is no Langfuse integration: runs are traced
from their typed events by :class:`~simplellmfunc.runtime.trace.TraceRecorder` (JSONL or
SQLite sinks). ``flush_all_observations()`` is kept as a no-op so that scripts ending with it
still run; the Langfuse client and config fail with that replacement named."""

from __future__ import annotations

from ._compat import compat_getattr

__all__ = ["flush_all_observations"]

_USE_TRACES = (
    "trace runs with simplellmfunc.runtime.trace.TraceRecorder (JSONLSink, SQLiteTraceSink)"
)


def flush_all_observations() -> None:
    """Nothing to flush: trace sinks write as events arrive."""


__getattr__ = compat_getattr(
    __name__,
    None,
    {
        "get_langfuse_client": _USE_TRACES,
        "langfuse_client": _USE_TRACES,
        "get_langfuse_config": _USE_TRACES,
        "langfuse_config": _USE_TRACES,
    },
)
