"""SimpleLLMFunc's name for the event module: everything in :mod:`simplellmfunc.events`, plus
:class:`~simplellmfunc.tools.ToolEventEmitter`.

(Run hooks — :class:`simplellmfunc.engine.RunHook`, ``@llm_chat(hooks=...)`` — are another
thing: objects that plug into the loop. This module holds no hooks of that kind.)
"""

from ..events import (
    CustomEvent,
    EventOrigin,
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
    events_only,
    filter_events,
    is_event_yield,
    is_response_yield,
    responses_only,
)
from ..tools import ToolEventEmitter

__all__ = [
    "CustomEvent",
    "EventOrigin",
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
    "ToolEventEmitter",
    "events_only",
    "filter_events",
    "is_event_yield",
    "is_response_yield",
    "responses_only",
]
