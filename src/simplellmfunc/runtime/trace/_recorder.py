"""TraceRecorder: turns the typed event stream of any agent into trace records.

Feed it the items of a decorated function called with ``enable_event=True``::

    recorder = TraceRecorder(sinks=[JSONLSink("trace.jsonl")])
    async with recorder:
        async for item in recorder.wrap(agent("hi", history=[], enable_event=True)):
            ...
    print(recorder.to_timeline())

or pass items one by one to :meth:`TraceRecorder.record`. Events are paired per agent call (so
concurrent and forked calls keep apart): an ``LLMCallStart`` with its ``LLMCallEnd`` (or
``LLMCallError``) makes one ``llm`` record, a ``ToolCallStart`` (or the batch's call, for calls
rejected before starting) with its ``ToolCallEnd`` one ``tool`` record, ``ReactEnd`` one ``end``
record. Steps still open when their run ends (an abort) are recorded as failed, ``cancelled``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from ..._events import EventOrigin, EventYield
from ..._resource import AsyncResource
from .._clock import Clock
from ._pairing import EventPairing
from ._record import TraceRecord, TraceStats, compute_stats, record_from_dict, timeline
from ._sinks import TraceSink

__all__ = ["TraceRecorder"]

T = TypeVar("T")


class TraceRecorder(AsyncResource):
    """Records one :class:`TraceRecord` per LLM call, tool call and run end.

    The recorder owns its sinks: :meth:`aclose` (or leaving ``async with``) closes them.

    Args:
        sinks: Where each record is also written as it is made (JSONL file, SQLite).
        max_chars: Longest input / output kept per record.
        trace_id: The id written with each record to the sinks (default: a random one).
        clock: Wall-clock source for ``started``.
    """

    def __init__(
        self,
        *,
        sinks: Sequence[TraceSink] = (),
        max_chars: int = 500,
        trace_id: str | None = None,
        clock: Clock = time.time,
    ) -> None:
        self.sinks = tuple(sinks)
        self.trace_id = trace_id or uuid.uuid4().hex
        self._pairing = EventPairing(max_chars, clock)
        self._records: list[TraceRecord] = []

    # -- feeding -----------------------------------------------------------------------------

    async def wrap(self, items: AsyncIterable[T]) -> AsyncGenerator[T, None]:
        """Yield every item of ``items`` after recording it; closes ``items`` when left early.

        Raises:
            RunError: If a sink fails.
        """
        iterator = aiter(items)
        try:
            async for item in iterator:
                await self.record(item)
                yield item
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                await close()

    async def record(self, item: object) -> list[TraceRecord]:
        """Record an ``EventYield`` (or a bare event); other items are ignored.

        Returns:
            The records this item completed (usually none or one).

        Raises:
            RunError: If a sink fails.
        """
        if isinstance(item, EventYield):
            event: object = item.event
            origin = item.origin
        else:
            event, origin = item, EventOrigin()
        base = len(self._records)
        made = [
            replace(r, step=base + i) for i, r in enumerate(self._pairing.consume(event, origin))
        ]
        for record in made:
            self._records.append(record)
            for sink in self.sinks:
                await sink.write(record, self.trace_id)
        return made

    @property
    def last_input(self) -> str:
        """The user input of the last run that started."""
        return self._pairing.last_input

    @last_input.setter
    def last_input(self, value: str) -> None:
        self._pairing.last_input = value

    # -- reading -----------------------------------------------------------------------------

    @property
    def records(self) -> tuple[TraceRecord, ...]:
        """Every record so far, in order."""
        return tuple(self._records)

    def get_step(self, n: int) -> TraceRecord:
        """The record of step ``n``.

        Raises:
            IndexError: If there is no such step.
        """
        return self._records[n]

    def stats(self) -> TraceStats:
        """The totals of the trace."""
        return compute_stats(self._records)

    def to_timeline(self, *, width: int = 80) -> str:
        """The step timeline (see :func:`~._record.timeline`)."""
        return timeline(self._records, width=width)

    def to_dicts(self) -> list[dict[str, Any]]:
        """The records as JSON-ready dicts."""
        return [r.to_dict() for r in self._records]

    def to_json(self, *, indent: int | None = None) -> str:
        """``{"trace_id", "records", "stats"}`` as JSON text."""
        return json.dumps(
            {
                "trace_id": self.trace_id,
                "records": self.to_dicts(),
                "stats": self.stats().to_dict(),
            },
            ensure_ascii=False,
            indent=indent,
        )

    def load(
        self, records: Sequence[Mapping[str, Any] | TraceRecord], *, trace_id: str | None = None
    ) -> None:
        """Replace the trace with ``records`` (dicts as written by :meth:`to_dicts`).

        New records continue the step numbers under a new trace id (``trace_id``, or a random
        one), since the sinks may already hold later steps of the old one.

        Raises:
            RunError: If a dict is not a trace record.
        """
        self._records = [r if isinstance(r, TraceRecord) else record_from_dict(r) for r in records]
        self._pairing.clear()
        self.trace_id = trace_id or uuid.uuid4().hex

    def clear(self) -> None:
        """Forget every record (sinks keep what they wrote)."""
        self._records.clear()
        self._pairing.clear()

    async def aclose(self) -> None:
        """Close the sinks.

        Raises:
            RunError: If a sink fails to close.
        """
        for sink in self.sinks:
            await sink.aclose()
