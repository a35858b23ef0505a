"""SimpleLLMFunc's ``hooks.stream`` module: the two kinds of items decorated functions yield,
``ReactOutput`` (either of them) and the stream filters of :mod:`simplellmfunc.events`."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import wraps
from typing import Any, TypeAlias

from ..events import (
    EventOrigin,
    EventYield,
    ReactEvent,
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
    "with_event_observer",
]

#: What ``enable_event=True`` functions yield: events, then the response.
ReactOutput: TypeAlias = EventYield | ResponseYield


def with_event_observer(
    observer: Callable[[ReactEvent], Awaitable[None]],
) -> Callable[[Callable[..., AsyncIterator[ReactOutput]]], Callable[..., AsyncIterator[Any]]]:
    """Decorate an ``enable_event=True`` function so that ``observer`` sees each event as it
    passes (the items are yielded unchanged; an observer that raises is logged and ignored)."""

    def decorate(
        func: Callable[..., AsyncIterator[ReactOutput]],
    ) -> Callable[..., AsyncIterator[Any]]:
        @wraps(func)
        async def observed(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            async for output in func(*args, **kwargs):
                if is_event_yield(output):
                    try:
                        await observer(output.event)
                    except Exception:  # boundary: an observer never breaks the stream
                        logging.getLogger("simplellmfunc.hooks").exception("event observer")
                yield output

        return observed

    return decorate
