"""SimpleLLMFunc's ``hooks.event_bus`` module: ``EventBus``, one ingress that stamps events of
an agent call tree with an :class:`~simplellmfunc.events.EventOrigin` (session, agent call,
monotonic ``seq``) and queues them for a consumer.

Runs here stamp their own events; an ``EventBus`` is for code that publishes events of its own
beside them.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..events import EventOrigin, EventYield, ReactEvent

__all__ = ["EventBus"]


class EventBus:
    """Stamps and queues events of one agent call tree (``seq`` counts from 1)."""

    def __init__(
        self,
        *,
        session_id: str | None = None,
        agent_call_id: str | None = None,
        parent_agent_call_id: str | None = None,
        fork_id: str | None = None,
        fork_depth: int = 0,
    ) -> None:
        self._template = EventOrigin(
            session_id=session_id or f"session_{uuid.uuid4().hex}",
            agent_call_id=agent_call_id or f"agent_{uuid.uuid4().hex}",
            parent_call_id=parent_agent_call_id,
            fork_id=fork_id,
            fork_depth=int(fork_depth),
        )
        self._seq = 0
        channel: tuple[MemoryObjectSendStream[EventYield], MemoryObjectReceiveStream[EventYield]]
        channel = anyio.create_memory_object_stream[EventYield](max_buffer_size=float("inf"))
        self._send, self._receive = channel

    def next_origin(self, **overrides: Any) -> EventOrigin:
        """The origin of the next event (``seq`` + 1), with ``overrides`` applied."""
        self._seq += 1
        return dataclasses.replace(self._template, seq=self._seq, **overrides)

    async def emit_and_get(
        self, event: ReactEvent, *, origin: EventOrigin | None = None, **overrides: Any
    ) -> EventYield:
        """The stamped event, not queued."""
        return EventYield(event, origin if origin is not None else self.next_origin(**overrides))

    async def emit_event(
        self, event: ReactEvent, *, origin: EventOrigin | None = None, **overrides: Any
    ) -> EventYield:
        """Stamp the event and queue it for :meth:`get`."""
        output = await self.emit_and_get(event, origin=origin, **overrides)
        self._send.send_nowait(output)
        return output

    async def get(self) -> EventYield:
        """The next queued event (waits for one)."""
        return await self._receive.receive()

    def get_nowait(self) -> EventYield | None:
        """The next queued event, or None."""
        try:
            return self._receive.receive_nowait()
        except anyio.WouldBlock:
            return None

    def close(self) -> None:
        """Release the queue."""
        self._send.close()
        self._receive.close()
