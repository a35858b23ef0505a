"""SimpleLLMFunc's name for the event module: everything in :mod:`simplellmfunc.events`, plus
:class:`~simplellmfunc.tools.ToolEventEmitter`, :class:`~simplellmfunc.AbortSignal` and
SimpleLLMFunc's aliases (``ReActEvent``, ``ReActEventType``, ``ReactOutput``,
``ABORT_SIGNAL_PARAM``), ``NoOpEventEmitter``, ``with_event_observer``, ``EventBus`` and the
input router of interactive sessions (``AgentInputRouter``). Its submodules ``events``,
``stream``, ``abort``, ``event_emitter``, ``event_bus`` and ``input_stream`` are SimpleLLMFunc's
module paths.

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
from .event_bus import EventBus
from .event_emitter import NoOpEventEmitter
from .events import ReActEvent, ReActEventType
from .input_stream import AgentInputRouter, InputRouteResult, ToolInputRequest, UserInputEvent
from .stream import ReactOutput, with_event_observer

__all__ = [
    "ABORT_SIGNAL_PARAM",
    "AbortSignal",
    "AgentInputRouter",
    "ApprovalRequestEvent",
    "ApprovalResolvedEvent",
    "CustomEvent",
    "EventBus",
    "EventOrigin",
    "EventStamp",
    "EventYield",
    "InputRouteResult",
    "LLMCallEndEvent",
    "LLMCallErrorEvent",
    "LLMCallStartEvent",
    "LLMChunkArriveEvent",
    "NoOpEventEmitter",
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
    "ToolInputRequest",
    "UserInputEvent",
    "events_only",
    "filter_events",
    "is_event_yield",
    "is_response_yield",
    "responses_only",
    "with_event_observer",
]

publish(__name__, __all__)
