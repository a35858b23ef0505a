"""Typed events of a run, and the two kinds of items decorated functions yield.

Every event is a frozen dataclass with a literal ``kind``; consumers ``match`` on the class or on
``kind``. Events travel wrapped in :class:`EventYield` with an :class:`EventOrigin` that says
where they come from; the final answer travels as :class:`ResponseYield`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias, TypeGuard

from ._usage import Usage

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
    "is_event_yield",
    "is_response_yield",
]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStamp:
    """What every event carries besides its own fields (keyword-only, after them).

    Attributes:
        timestamp: When the event was created (UTC).
        trace_id: The id of the agent call that emitted it (``EventOrigin.agent_call_id``).
        func_name: The name of the decorated function whose run emitted it.

    None of them takes part in equality.
    """

    timestamp: datetime = field(default_factory=_now, compare=False)
    trace_id: str = field(default="", compare=False)
    func_name: str = field(default="", compare=False)


TerminatedBy: TypeAlias = Literal[
    "answer",
    "terminate",
    "implicit",
    "max_steps",
    "loop",
    "paused",
    "aborted",
    "error",
    "deferred",
    "empty",
    "truncated",
]


@dataclass(frozen=True, slots=True)
class ReactStartEvent(EventStamp):
    """A run started."""

    user_input: str
    tool_names: tuple[str, ...] = ()
    kind: Literal["react_start"] = "react_start"

    @property
    def user_task_prompt(self) -> str:
        """SimpleLLMFunc's name for :attr:`user_input`."""
        return self.user_input


@dataclass(frozen=True, slots=True)
class ReactIterationStartEvent(EventStamp):
    """An iteration (one LLM call and its tool batch) started."""

    iteration: int
    kind: Literal["react_iteration_start"] = "react_iteration_start"


@dataclass(frozen=True, slots=True)
class ReactIterationEndEvent(EventStamp):
    """An iteration ended; ``tool_calls`` is how many tools it ran."""

    iteration: int
    tool_calls: int = 0
    kind: Literal["react_iteration_end"] = "react_iteration_end"


@dataclass(frozen=True, slots=True)
class LLMCallStartEvent(EventStamp):
    """An LLM call is about to be sent."""

    iteration: int
    model: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...] = ()
    stream: bool = False
    kind: Literal["llm_call_start"] = "llm_call_start"


@dataclass(frozen=True, slots=True)
class LLMChunkArriveEvent(EventStamp):
    """A streamed piece of the reply arrived (``text`` for text, ``reasoning`` for reasoning);
    ``chunk_index`` counts the pieces of one LLM call from 0. Under the JSON tool protocol a
    step's JSON is not prose and is not reported: a streamed run gets the answer as one piece
    once the step is read (the raw reply is ``LLMCallEndEvent.response_text``)."""

    text: str = ""
    reasoning: str = ""
    accumulated_text: str = ""
    kind: Literal["llm_chunk_arrive"] = "llm_chunk_arrive"
    chunk_index: int = 0

    @property
    def accumulated_content(self) -> str:
        """SimpleLLMFunc's name for :attr:`accumulated_text`."""
        return self.accumulated_text

    @property
    def chunk(self) -> LLMChunkArriveEvent:
        """SimpleLLMFunc's provider chunk: here the event itself (read :attr:`text`)."""
        return self


@dataclass(frozen=True, slots=True)
class LLMCallEndEvent(EventStamp):
    """An LLM call finished; ``usage`` is this call's usage.

    ``response_text`` is the reply as the model wrote it; ``reply_text`` is what it says to
    the reader (what a front end shows when nothing was streamed): the same text, except under
    the JSON tool protocol, where it is the step's answer ("" for a tool call).
    """

    iteration: int
    response_text: str
    tool_calls: tuple[Mapping[str, Any], ...]
    usage: Usage
    finish_reason: str | None
    duration_s: float
    provider: str = ""
    model: str = ""
    reply_text: str = ""
    kind: Literal["llm_call_end"] = "llm_call_end"

    @property
    def execution_time(self) -> float:
        """SimpleLLMFunc's name for :attr:`duration_s`."""
        return self.duration_s

    @property
    def content(self) -> str:
        """SimpleLLMFunc's name for :attr:`response_text`."""
        return self.response_text


@dataclass(frozen=True, slots=True)
class LLMCallErrorEvent(EventStamp):
    """An LLM call failed (emitted for every failed call, retried or not)."""

    iteration: int
    error_type: str
    message: str
    status: int | None = None
    retryable: bool = False
    kind: Literal["llm_call_error"] = "llm_call_error"

    @property
    def error_message(self) -> str:
        """SimpleLLMFunc's name for :attr:`message`."""
        return self.message


@dataclass(frozen=True, slots=True)
class ToolCallsBatchStartEvent(EventStamp):
    """A batch of tool calls (one assistant turn) started."""

    iteration: int
    tool_calls: tuple[Mapping[str, Any], ...]
    kind: Literal["tool_calls_batch_start"] = "tool_calls_batch_start"

    @property
    def batch_size(self) -> int:
        """How many tool calls the batch has."""
        return len(self.tool_calls)


@dataclass(frozen=True, slots=True)
class ToolCallsBatchEndEvent(EventStamp):
    """A batch finished; ``succeeded`` + ``failed`` = number of calls; ``results`` holds each
    call's end event, in call order (cancelled calls have none)."""

    iteration: int
    succeeded: int
    failed: int
    duration_s: float
    results: tuple[ToolCallEndEvent, ...] = ()
    kind: Literal["tool_calls_batch_end"] = "tool_calls_batch_end"

    @property
    def batch_size(self) -> int:
        """How many tool calls the batch had."""
        return self.succeeded + self.failed

    @property
    def success_count(self) -> int:
        """SimpleLLMFunc's name for :attr:`succeeded`."""
        return self.succeeded

    @property
    def error_count(self) -> int:
        """SimpleLLMFunc's name for :attr:`failed`."""
        return self.failed

    @property
    def total_execution_time(self) -> float:
        """SimpleLLMFunc's name for :attr:`duration_s`."""
        return self.duration_s

    @property
    def tool_results(self) -> list[dict[str, Any]]:
        """:attr:`results` as SimpleLLMFunc's dicts: ``tool_name``, ``tool_call_id``,
        ``result``, ``execution_time``, ``success``."""
        return [
            {
                "tool_name": end.tool_name,
                "tool_call_id": end.tool_call_id,
                "result": end.result,
                "execution_time": end.duration_s,
                "success": end.success,
            }
            for end in self.results
        ]


@dataclass(frozen=True, slots=True)
class ToolCallArgumentsDeltaEvent(EventStamp):
    """A streamed fragment of a tool call's arguments."""

    tool_call_id: str
    tool_name: str
    arguments_delta: str
    kind: Literal["tool_call_arguments_delta"] = "tool_call_arguments_delta"


@dataclass(frozen=True, slots=True)
class ToolCallStartEvent(EventStamp):
    """A tool started with parsed ``arguments``."""

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    kind: Literal["tool_call_start"] = "tool_call_start"


@dataclass(frozen=True, slots=True)
class ToolCallEndEvent(EventStamp):
    """A tool finished; ``success`` is false when it failed, ``result`` is what the model sees."""

    tool_call_id: str
    tool_name: str
    result: str
    success: bool
    duration_s: float
    kind: Literal["tool_call_end"] = "tool_call_end"

    @property
    def execution_time(self) -> float:
        """SimpleLLMFunc's name for :attr:`duration_s`."""
        return self.duration_s


@dataclass(frozen=True, slots=True)
class ToolCallErrorEvent(EventStamp):
    """A tool call failed (bad arguments, unknown tool, exception, timeout, cancelled)."""

    tool_call_id: str
    tool_name: str
    error_type: str
    message: str
    kind: Literal["tool_call_error"] = "tool_call_error"

    @property
    def error_message(self) -> str:
        """SimpleLLMFunc's name for :attr:`message`."""
        return self.message


@dataclass(frozen=True, slots=True)
class ReactEndEvent(EventStamp):
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

    @property
    def total_execution_time(self) -> float:
        """SimpleLLMFunc's name for :attr:`duration_s`."""
        return self.duration_s

    @property
    def total_iterations(self) -> int:
        """SimpleLLMFunc's name for :attr:`iterations`."""
        return self.iterations

    @property
    def total_tool_calls(self) -> int:
        """SimpleLLMFunc's name for :attr:`tool_calls`."""
        return self.tool_calls

    @property
    def total_llm_calls(self) -> int:
        """How many LLM calls the run made (forks included)."""
        return self.total_usage.calls

    @property
    def total_token_usage(self) -> Usage:
        """SimpleLLMFunc's name for :attr:`total_usage`."""
        return self.total_usage


@dataclass(frozen=True, slots=True)
class ApprovalRequestEvent(EventStamp):
    """A tool call waits for a person's answer before it runs (approve, deny, edit).

    Answer it by ``request_id`` (the call id): ``Run.answer``, ``SessionStore.answer`` or
    :func:`simplellmfunc.answer_request`; the wait ends with an :class:`ApprovalResolvedEvent`.
    """

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    reason: str
    session_id: str
    timeout_s: float | None = None
    kind: Literal["approval_request"] = "approval_request"

    @property
    def request_id(self) -> str:
        """The id to answer it by (the tool call id)."""
        return self.tool_call_id


ApprovalOutcome: TypeAlias = Literal["approved", "edited", "denied", "timeout", "cancelled"]


@dataclass(frozen=True, slots=True)
class ApprovalResolvedEvent(EventStamp):
    """The wait of an :class:`ApprovalRequestEvent` ended: ``outcome`` says how (``approved``,
    ``edited`` with the new ``arguments``, ``denied`` with the ``reason``, ``timeout`` or
    ``cancelled`` by an abort); only approved and edited calls run."""

    tool_call_id: str
    tool_name: str
    outcome: ApprovalOutcome
    reason: str = ""
    arguments: Mapping[str, Any] | None = None
    kind: Literal["approval_resolved"] = "approval_resolved"


@dataclass(frozen=True, slots=True)
class CustomEvent(EventStamp):
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
    | ApprovalRequestEvent
    | ApprovalResolvedEvent
    | ReactEndEvent
    | CustomEvent
)


@dataclass(frozen=True, slots=True)
class EventOrigin:
    """Where an event comes from.

    ``seq`` increases monotonically within one agent call; fork fields are set for events of
    forked sub-agents; tool fields for events emitted by a tool; ``agent`` names the agent of a
    multi-agent run (agent as tool, handoff, group chat, parallel), ``fork_depth`` its depth.
    ``parent_tool_call_id`` is the parent's tool call that started the sub-run (a SelfReference
    fork started from a cell, an agent used as a tool), so a front end can draw the sub-run's
    events inside that call's card; ``None`` when no tool call started it.
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
    parent_tool_call_id: str | None = None

    @property
    def event_seq(self) -> int:
        """SimpleLLMFunc's name for :attr:`seq`."""
        return self.seq

    @property
    def parent_agent_call_id(self) -> str | None:
        """SimpleLLMFunc's name for :attr:`parent_call_id`."""
        return self.parent_call_id

    def as_dict(self) -> dict[str, Any]:
        """The fields as a dict, with SimpleLLMFunc's names of the same facts beside ours
        (``event_seq``, ``parent_agent_call_id``)."""
        fields = {name: getattr(self, name) for name in self.__dataclass_fields__}
        return {
            **fields,
            "event_seq": self.seq,
            "parent_agent_call_id": self.parent_call_id,
        }


@dataclass(frozen=True, slots=True)
class EventYield:
    """An event, as yielded by decorated functions with ``enable_event=True``."""

    event: ReactEvent
    origin: EventOrigin = field(default_factory=EventOrigin)
    type: Literal["event"] = "event"


@dataclass(frozen=True, slots=True)
class ResponseYield:
    """The result: the response (text or parsed value) and the updated history.

    It unpacks as ``response, messages = item``, so SimpleLLMFunc's
    ``async for response, messages in responses_only(stream)`` works unchanged.
    """

    response: Any
    messages: list[dict[str, Any]] = field(default_factory=list)
    type: Literal["response"] = "response"

    def __iter__(self) -> Iterator[Any]:
        return iter((self.response, self.messages))


def is_event_yield(item: object) -> TypeGuard[EventYield]:
    """Whether ``item`` is an :class:`EventYield`."""
    return isinstance(item, EventYield)


def is_response_yield(item: object) -> TypeGuard[ResponseYield]:
    """Whether ``item`` is a :class:`ResponseYield`."""
    return isinstance(item, ResponseYield)
