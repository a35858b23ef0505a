"""Event emission for one run: origins, sequence numbers, and a cheap path when nobody listens."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import replace
from typing import Any

from .._events import CustomEvent, EventOrigin, EventYield, ReactEvent

__all__ = [
    "Emitter",
    "current_tool_call_id",
    "enter_tool_call",
    "in_tool_call",
    "leave_tool_call",
]

_TOOL_CALL: ContextVar[str | None] = ContextVar("simplellmfunc_tool_call", default=None)


def current_tool_call_id() -> str | None:
    """The id of the tool call running in this context (a sub-run started here records it as
    ``origin.parent_tool_call_id``), if any."""
    return _TOOL_CALL.get()


@contextmanager
def in_tool_call(call_id: str) -> Iterator[None]:
    """Mark the tool call ``call_id`` as running in this context while the block runs."""
    token = _TOOL_CALL.set(call_id)
    try:
        yield
    finally:
        _TOOL_CALL.reset(token)


def enter_tool_call(call_id: str) -> Token[str | None]:
    """:func:`in_tool_call` without a context manager (the scheduler's path, once per tool
    call): mark ``call_id`` as running; :func:`leave_tool_call` with the token undoes it."""
    return _TOOL_CALL.set(call_id)


def leave_tool_call(token: Token[str | None]) -> None:
    """Undo :func:`enter_tool_call`."""
    _TOOL_CALL.reset(token)


Send = Callable[[Any], Awaitable[None]]
#: What :meth:`Emitter.tap` hands each event to (its return value is ignored).
Observer = Callable[[EventYield], Awaitable[object]]


class Emitter:
    """Wraps events in :class:`EventYield` with a monotonic ``seq`` and sends them.

    ``wants_events`` is false when the caller did not ask for events: the loop then skips
    building them (``LLMCallStartEvent`` copies the transcript, which costs CPU per call).
    Each sent event is stamped with the agent call id (``trace_id``) and ``func_name``.
    Observers added with :meth:`tap` see every event before the sink does, whichever sink the
    run is connected to (a trace recorder watching a run someone else drives: one stream, one
    pump, and nothing in it is seen twice).
    """

    __slots__ = (
        "_origin",
        "_send",
        "_seq",
        "_sink",
        "_taps",
        "_wants",
        "func_name",
        "wants_events",
        "wants_raw",
        "wants_text",
    )

    def __init__(
        self,
        send: Send | None,
        origin: EventOrigin,
        *,
        wants_events: bool,
        wants_text: bool = False,
        wants_raw: bool = False,
        func_name: str = "",
    ) -> None:
        self.func_name = func_name
        self._send = send
        self._sink = send
        self._taps: tuple[Observer, ...] = ()
        self._origin = origin
        self._seq = 0
        self._wants = (wants_events, wants_text, wants_raw)
        self.wants_events = wants_events and send is not None
        self.wants_text = wants_text and send is not None
        self.wants_raw = wants_raw and send is not None

    def connect(self, send: Send) -> None:
        """Send to ``send`` from now on (the run picks its sink when it is iterated); the
        observers of :meth:`tap` keep seeing the events first."""
        self._sink = send
        self._send = _tapped(send, self._taps) if self._taps else send
        self.wants_events = self._wants[0]
        self.wants_text = self._wants[1]
        self.wants_raw = self._wants[2]

    def tap(self, observer: Observer) -> None:
        """Hand every event (each ``EventYield``, a sub-run's included; not text or raw items)
        to ``observer`` too, awaited before the event goes to the sink, from now on and
        through any later :meth:`connect`. Set it before the run starts: a sub-run's emitter
        (:meth:`derive`) takes the stream as it is then."""
        self._taps = (*self._taps, observer)
        if self._sink is not None:
            self._send = _tapped(self._sink, self._taps)

    @property
    def requested(self) -> tuple[bool, bool, bool]:
        """What the caller asked for: (events, text, raw), whether connected yet or not."""
        return self._wants

    @property
    def agent_call_id(self) -> str:
        """The id of this agent call."""
        return self._origin.agent_call_id

    @property
    def origin(self) -> EventOrigin:
        """The origin stamped on this emitter's events (``seq`` aside)."""
        return self._origin

    def derive(self, origin: EventOrigin) -> Emitter:
        """An emitter of events only, into the same stream, with ``origin`` (a fork's run).

        Text and raw items are never sent: they are the parent's output.
        """
        return Emitter(self._send, origin, wants_events=self.wants_events, func_name=self.func_name)

    async def event(self, event: ReactEvent) -> None:
        """Send ``event`` if events are wanted."""
        if self.wants_events and self._send is not None:
            self._seq += 1
            origin = EventOrigin(
                self._origin.session_id,
                self._origin.agent_call_id,
                self._seq,
                self._origin.parent_call_id,
                self._origin.fork_id,
                self._origin.fork_depth,
                agent=self._origin.agent,
                parent_tool_call_id=self._origin.parent_tool_call_id,
            )
            await self._send(EventYield(self._stamp_fresh(event), origin))

    def _stamp_fresh(self, event: ReactEvent) -> ReactEvent:
        """``event`` stamped with this call's id and function name, without a copy.

        The engine's events are built just before they are sent, with empty stamps, and
        nobody has seen them yet: they are stamped in place (the one write to a frozen event,
        before it is published). An event that already carries another stamp (sent again, by
        another run) is copied as :meth:`_stamp` does.
        """
        trace_id, func_name = self._origin.agent_call_id, self.func_name
        if event.trace_id == trace_id and event.func_name == func_name:
            return event
        if event.trace_id or event.func_name:
            return self._stamp(event)
        object.__setattr__(event, "trace_id", trace_id)
        object.__setattr__(event, "func_name", func_name)
        return event

    def _stamp(self, event: ReactEvent) -> ReactEvent:
        """A stamped copy: for events made outside the engine (a tool's custom events)."""
        return replace(event, trace_id=self._origin.agent_call_id, func_name=self.func_name)

    async def custom(self, event: CustomEvent) -> None:
        """Send a tool's custom event, tagged with the tool's name and call id."""
        if self.wants_events and self._send is not None:
            self._seq += 1
            base = self._origin
            origin = EventOrigin(
                base.session_id,
                base.agent_call_id,
                self._seq,
                base.parent_call_id,
                base.fork_id,
                base.fork_depth,
                event.tool_name,
                event.tool_call_id,
                base.agent,
                base.parent_tool_call_id,
            )
            await self._send(EventYield(self._stamp(event), origin))

    async def raw(self, item: Any) -> None:
        """Send a non-event item (text deltas in plain stream mode, raw chunks)."""
        if self._send is not None:
            await self._send(item)


def _tapped(send: Send, taps: tuple[Observer, ...]) -> Send:
    """``send``, handing each event to ``taps`` first."""

    async def tapped(item: Any) -> None:
        if type(item) is EventYield:
            for tap in taps:
                await tap(item)
        await send(item)

    return tapped
