"""This process's side of its durable runs: the abort signal of each run it executes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..._abort import AbortSignal

__all__ = ["abort_local", "local_abort"]

_SIGNALS: dict[str, AbortSignal] = {}


@contextmanager
def local_abort(workflow_id: str) -> Iterator[AbortSignal]:
    """The abort signal of the run ``workflow_id`` while this process executes it."""
    signal = AbortSignal()
    _SIGNALS[workflow_id] = signal
    try:
        yield signal
    finally:
        if _SIGNALS.get(workflow_id) is signal:
            del _SIGNALS[workflow_id]


def abort_local(workflow_id: str, reason: str) -> bool:
    """Abort the run ``workflow_id`` if this process executes it; return whether it did."""
    signal = _SIGNALS.get(workflow_id)
    if signal is None:
        return False
    signal.abort(reason)
    return True
