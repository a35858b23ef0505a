"""Typed events of a run, and the two kinds of items decorated functions yield.

Every event is a frozen dataclass with a literal ``kind``; consumers ``match`` on the class or on
``kind``. Events travel wrapped in :class:`EventYield` with an :class:`EventOrigin` that says
where they come from; the final answer travels as :class:`ResponseYield`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeGuard

from ._usage import Usage

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
    "is_event_yield",
    "is_response_yield",
]

TerminatedBy: TypeAlias = Literal[
    "answer", "terminate", "implicit", "max_steps", "loop", "paused", "aborted", "error"
]


@dataclass(frozen=True, slots=True)
class ReactStartEvent:
    """A run started."""

    user_input: str
    tool_names: tuple[str, ...] = ()
    kind: Literal["react_start"] = "react_start"


@dataclass(frozen=True, slots=True)
class ReactIterationStartEvent:
    """An iteration (one LLM call and its tool batch) started."""

    iteration: int
    kind: Literal["react_iteration_start"] = "react_iteration_start"


@dataclass(frozen=True, slots=True)
class ReactIterationEndEvent:
    """An iteration ended; ``tool_calls`` is how many tools it ran."""

    iteration: int
    tool_calls: int = 0
    kind: Literal["react_iteration_end"] = "react_iteration_end"


@dataclass(frozen=True, slots=True)
class LLMCallStartEvent:
    """An LLM call is about to be sent."""

    iteration: int
    model: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...] = ()
    stream: bool = False
    kind: Literal["llm_call_start"] = "llm_call_start"


@dataclass(frozen=True, slots=True)
class LLMChunkArriveEvent:
    """A streamed piece of the reply arrived (``text`` for text, ``reasoning`` for reasoning)."""

    text: str = ""
    reasoning: str = ""
    accumulated_text: str = ""
    kind: Literal["llm_chunk_arrive"] = "llm_chunk_arrive"


@dataclass(frozen=True, slots=True)
class LLMCallEndEvent:
    """An LLM call finished; ``usage`` is this call's usage."""

    iteration: int
    response_text: str
    tool_calls: tuple[Mapping[str, Any], ...]
    usage: Usage
    finish_reason: str | None
    duration_s: float
    provider: str = ""
    model: str = ""
    kind: Literal["llm_call_end"] = "llm_call_end"


@dataclass(frozen=True, slots=True)
class LLMCallErrorEvent:
    """An LLM call failed (emitted for every failed call, retried or not)."""

    iteration: int
    error_type: str
    message: str
    status: int | None = None
    retryable: bool = False
    kind: Literal["llm_call_error"] = "llm_call_error"


@dataclass(frozen=True, slots=True)
class ToolCallsBatchStartEvent:
    """A batch of tool calls (one assistant turn) started."""

    iteration: int
    tool_calls: tuple[Mapping[str, Any], ...]
    kind: Literal["tool_calls_batch_start"] = "tool_calls_batch_start"


@dataclass(frozen=True, slots=True)
class ToolCallsBatchEndEvent:
    """A batch finished; ``succeeded`` + ``failed`` = number of calls."""

    iteration: int
    succeeded: int
    failed: int
    duration_s: float
    kind: Literal["tool_calls_batch_end"] = "tool_calls_batch_end"


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDeltaEvent:
    """A streamed fragment of a tool call's arguments."""

    tool_call_id: str
    tool_name: str
    arguments_delta: str
    kind: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStartEvent:
    """A tool started with parsed ``arguments``."""

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallEndEvent:
    """A tool finished; ``success`` is false when it failed, ``result`` is what the model sees."""

    tool_call_id: str
    tool_name: str
    result: str
    success: bool
    duration_s: float
    kind: Literal["tool_call_end"] = "tool_call_end"


@dataclass(frozen=True, slots=True)
class ToolCallErrorEvent:
    """A tool call failed (bad arguments, unknown tool, exception, timeout, cancelled)."""

    tool_call_id: str
    tool_name: str
    error_type: str
    message: str
    kind: Literal["tool_call_error"] = "tool_call_error"


@dataclass(frozen=True, slots=True)
class ReactEndEvent:
    """A run ended.

    Attributes:
        final_response: The final answer text.
        final_messages: The final transcript as chat dicts (valid for the next call).
        total_usage: Usage summed over every LLM call of the run (forks included).
        iterations: How many iterations ran.
        tool_calls: How many tool calls ran.
        terminated_by: Why the run ended.
        aborted: Whether an abort ended it; ``abort_reason`` says why.
    """

    final_response: str
    final_messages: tuple[Mapping[str, Any], ...]
    total_usage: Usage
    iterations: int
    tool_calls: int
    duration_s: float
    terminated_by: TerminatedBy = "answer"
    aborted: bool = False
    abort_reason: str = ""
    error: str | None = None
    kind: Literal["react_end"] = "react_end"


@dataclass(frozen=True, slots=True)
class CustomEvent:
    """An event a tool emits through its ``ToolEventEmitter``."""

    event_name: str
    data: Any = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    kind: Literal["custom"] = "custom"


ReactEvent: TypeAlias = (
    ReactStartEvent
    | ReactIterationStartEvent
    | ReactIterationEndEvent
    | LLMCallStartEvent
    | LLMChunkArriveEvent
    | LLMCallEndEvent
    | LLMCallErrorEvent
    | ToolCallsBatchStartEvent
    | ToolCallsBatchEndEvent
    | ToolCallArgumentsDeltaEvent
    | ToolCallStartEvent
    | ToolCallEndEvent
    | ToolCallErrorEvent
    | ReactEndEvent
    | CustomEvent
)


@dataclass(frozen=True, slots=True)
class EventOrigin:
    """Where an event comes from.

    ``seq`` increases monotonically within one agent call; fork fields are set for events of
    forked sub-agents; tool fields for events emitted by a tool; ``agent`` names the agent of a
    multi-agent run (agent as tool, handoff, group chat, parallel), ``fork_depth`` its depth.
    """

    session_id: str = ""
    agent_call_id: str = ""
    seq: int = 0
    parent_call_id: str | None = None
    fork_id: str | None = None
    fork_depth: int = 0
    tool_name: str | None = None
    tool_call_id: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class EventYield:
    """An event, as yielded by decorated functions with ``enable_event=True``."""

    event: ReactEvent
    origin: EventOrigin = field(default_factory=EventOrigin)
    type: Literal["event"] = "event"


@dataclass(frozen=True, slots=True)
class ResponseYield:
    """The result: the response (text or parsed value) and the updated history."""

    response: Any
    messages: list[dict[str, Any]] = field(default_factory=list)
    type: Literal["response"] = "response"


def is_event_yield(item: object) -> TypeGuard[EventYield]:
    """Whether ``item`` is an :class:`EventYield`."""
    return isinstance(item, EventYield)


def is_response_yield(item: object) -> TypeGuard[ResponseYield]:
    """Whether ``item`` is a :class:`ResponseYield`."""
    return isinstance(item, ResponseYield)
