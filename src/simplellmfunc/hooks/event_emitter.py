"""SimpleLLMFunc's ``hooks.event_emitter`` module: :class:`~simplellmfunc.tools.ToolEventEmitter`
and ``NoOpEventEmitter``, an emitter that drops every event."""

from __future__ import annotations

from typing import Any

from ..tools import ToolEventEmitter

__all__ = ["NoOpEventEmitter", "ToolEventEmitter"]


class NoOpEventEmitter(ToolEventEmitter):
    """An emitter that emits nothing: pass it to a tool function that wants an
    ``event_emitter`` when no one reads its events (``input()`` in a PyRepl then fails at
    once instead of waiting)."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(live=False)

    async def emit(self, event_name: str, data: Any = None) -> None:
        """Drop the event."""
