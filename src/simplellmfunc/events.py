"""Typed events of a run, the two kinds of items decorated functions yield, and filters.

Every event is a frozen dataclass with a literal ``kind``; consumers ``match`` on the class or
on ``kind``. ``simplellmfunc.hooks`` offers the same names under SimpleLLMFunc's module name.
"""

from collections.abc import AsyncIterable, AsyncIterator, Collection
from typing import Any

from ._events import (
    ApprovalOutcome,
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    CustomEvent,
    EventOrigin,
    EventStamp,
    EventYield,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMCallStartEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ReactEvent,
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    ReactStartEvent,
    ResponseYield,
    TerminatedBy,
    ToolCallArgumentsDeltaEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
    ToolCallStartEvent,
    is_event_yield,
    is_response_yield,
)
from ._lazy import publish
from .exceptions import ArgumentValueError

__all__ = [
    "ApprovalOutcome",
    "ApprovalRequestEvent",
    "ApprovalResolvedEvent",
    "CustomEvent",
    "EventOrigin",
    "EventStamp",
    "EventYield",
    "LLMCallEndEvent",
    "LLMCallErrorEvent",
    "LLMCallStartEvent",
    "LLMChunkArriveEvent",
    "ReactEndEvent",
    "ReactEvent",
    "ReactIterationEndEvent",
    "ReactIterationStartEvent",
    "ReactStartEvent",
    "ResponseYield",
    "TerminatedBy",
    "ToolCallArgumentsDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallErrorEvent",
    "ToolCallStartEvent",
    "ToolCallsBatchEndEvent",
    "ToolCallsBatchStartEvent",
    "events_only",
    "filter_events",
    "is_event_yield",
    "is_response_yield",
    "responses_only",
]


async def responses_only(stream: AsyncIterable[Any]) -> AsyncIterator[ResponseYield]:
    """Keep only the :class:`ResponseYield` items of an event-mode stream."""
    async for item in stream:
        if isinstance(item, ResponseYield):
            yield item


async def events_only(stream: AsyncIterable[Any]) -> AsyncIterator[EventYield]:
    """Keep only the :class:`EventYield` items of an event-mode stream."""
    async for item in stream:
        if isinstance(item, EventYield):
            yield item


async def filter_events(
    stream: AsyncIterable[Any],
    *kinds: type[ReactEvent],
    event_types: Collection[str] | None = None,
) -> AsyncIterator[Any]:
    """Keep the :class:`EventYield` items whose event is an instance of one of ``kinds``.

    With SimpleLLMFunc's ``event_types=`` (a set of ``ReActEventType`` / ``kind`` strings)
    instead, yield the matching events themselves, as SimpleLLMFunc's ``filter_events`` does.
    """
    if event_types is not None:
        if kinds:
            raise ArgumentValueError("filter_events: give event classes or event_types=, not both")
        wanted = {str(kind) for kind in event_types}
        async for item in stream:
            if isinstance(item, EventYield) and item.event.kind in wanted:
                yield item.event
        return
    async for item in stream:
        if isinstance(item, EventYield) and isinstance(item.event, kinds):
            yield item


publish(__name__, __all__, claims=("simplellmfunc._events",))
