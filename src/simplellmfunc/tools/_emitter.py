"""What a running tool gets from the engine: its :class:`ToolContext` and the
:class:`ToolEventEmitter` that streams custom events out of the run."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from .._abort import AbortSignal
from .._events import CustomEvent, EventOrigin, EventYield

__all__ = ["EventSink", "ToolContext", "ToolEventEmitter"]

EventSink = Callable[[CustomEvent], Awaitable[None]]


class ToolEventEmitter:
    """Emits :class:`~simplellmfunc.hooks.CustomEvent` s from inside a tool.

    Inside a run the engine passes each tool that declares an ``event_emitter`` parameter its own
    emitter, whose events stream out live, tagged with the tool name and call id. Created by hand
    (``ToolEventEmitter()``), it collects the events for :meth:`get_events`, and its holder is
    taken to be reading them while the tool runs (``live``: PyRepl then lets ``input()`` ask,
    as SimpleLLMFunc does; pass ``live=False`` when nobody reads them).
    """

    __slots__ = ("_events", "_sink", "live", "tool_call_id", "tool_name")

    def __init__(
        self,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        sink: EventSink | None = None,
        live: bool | None = None,
    ) -> None:
        self.tool_name = tool_name
        self.tool_call_id = tool_call_id
        self._sink = sink
        #: Whether someone receives the events while the tool runs (and could answer them,
        #: e.g. an ``input()`` request). Defaults to true.
        self.live = True if live is None else live
        self._events: list[EventYield] = []

    async def emit(self, event_name: str, data: object = None) -> None:
        """Emit one custom event (delivered before this returns when a run consumes it)."""
        event = CustomEvent(event_name, data, self.tool_name, self.tool_call_id)
        if self._sink is not None:
            await self._sink(event)
        else:
            origin = EventOrigin(tool_name=self.tool_name, tool_call_id=self.tool_call_id)
            self._events.append(EventYield(event, origin))

    async def emit_batch(self, events: Iterable[tuple[str, object]]) -> None:
        """Emit ``(event_name, data)`` pairs in order."""
        for name, data in events:
            await self.emit(name, data)

    def has_events(self) -> bool:
        """Whether events were collected (only a standalone emitter collects them)."""
        return bool(self._events)

    async def get_events(self) -> list[EventYield]:
        """Return the events collected since the last call and forget them, as SimpleLLMFunc's
        does (only a standalone emitter collects them): polling it yields each event once."""
        events, self._events = self._events, []
        return events

    def clear(self) -> None:
        """Forget the collected events."""
        self._events.clear()


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a running tool may learn about its call; declare a ``context: ToolContext`` param."""

    tool_call_id: str
    tool_name: str
    event_emitter: ToolEventEmitter
    abort_signal: AbortSignal | None = None
