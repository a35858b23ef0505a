"""SimpleLLMFunc's name for the event module: everything in :mod:`simplellmfunc.events`, plus
:class:`~simplellmfunc.tools.ToolEventEmitter`, :class:`~simplellmfunc.AbortSignal` and
SimpleLLMFunc's aliases (``ReActEvent``, ``ReActEventType``, ``ReactOutput``,
``ABORT_SIGNAL_PARAM``). Its submodules ``events``, ``stream``, ``abort`` and ``event_emitter``
are SimpleLLMFunc's module paths for the same objects.

(Run hooks — :class:`simplellmfunc.engine.RunHook`, ``@llm_chat(hooks=...)`` — are another
thing: objects that plug into the loop. This module holds no hooks of that kind.)
"""

from .._lazy import publish
from ..events import (
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
    events_only,
    filter_events,
    is_event_yield,
    is_response_yield,
    responses_only,
)
from ..tools import ToolEventEmitter
from .abort import ABORT_SIGNAL_PARAM, AbortSignal
from .events import ReActEvent, ReActEventType
from .stream import ReactOutput

__all__ = [
    "ABORT_SIGNAL_PARAM",
    "AbortSignal",
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
    "ReActEvent",
    "ReActEventType",
    "ReactEndEvent",
    "ReactEvent",
    "ReactIterationEndEvent",
    "ReactIterationStartEvent",
    "ReactOutput",
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

publish(__name__, __all__)
