"""SimpleLLMFunc's ``hooks.stream`` module: the two kinds of items decorated functions yield,
``ReactOutput`` (either of them) and the stream filters of :mod:`simplellmfunc.events`."""

from __future__ import annotations

from typing import TypeAlias

from ..events import (
    EventOrigin,
    EventYield,
    ResponseYield,
    events_only,
    filter_events,
    is_event_yield,
    is_response_yield,
    responses_only,
)

__all__ = [
    "EventOrigin",
    "EventYield",
    "ReactOutput",
    "ResponseYield",
    "events_only",
    "filter_events",
    "is_event_yield",
    "is_response_yield",
    "responses_only",
]

#: What ``enable_event=True`` functions yield: events, then the response.
ReactOutput: TypeAlias = EventYield | ResponseYield
