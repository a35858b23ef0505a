"""Answering ``input()``: pending requests of one REPL, and who can answer them."""

from __future__ import annotations

import anyio

from ...tools import ToolEventEmitter

__all__ = ["InputBroker", "delivers_live"]


def delivers_live(emitter: ToolEventEmitter | None) -> bool:
    """Whether someone receives ``emitter``'s events while the tool runs (and can answer).

    A standalone ``ToolEventEmitter()`` only collects events for later, so an ``input()``
    request would wait for nobody: input is enabled only for a ``live`` emitter.
    """
    return emitter is not None and emitter.live


class InputBroker:
    """Pending ``input()`` requests of one REPL, answered by ``PyRepl.submit_input``."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[anyio.Event, list[str]]] = {}

    def open(self, request_id: str) -> tuple[anyio.Event, list[str]]:
        """Register a request; the answer lands in the returned list and sets the event."""
        slot: tuple[anyio.Event, list[str]] = (anyio.Event(), [])
        self._pending[request_id] = slot
        return slot

    def close(self, request_id: str) -> None:
        """Forget a request (answered, timed out or abandoned)."""
        self._pending.pop(request_id, None)

    def submit(self, request_id: str, value: str) -> bool:
        """Answer a pending request; False when there is no such request (any more)."""
        slot = self._pending.pop(request_id, None)
        if slot is None:
            return False
        slot[1].append(value)
        slot[0].set()
        return True
