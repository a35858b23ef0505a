"""SimpleLLMFunc's ``hooks.events`` module: the event classes of :mod:`simplellmfunc.events`,
plus ``ReActEvent`` (the union of every event) and ``ReActEventType`` (the ``kind`` values)."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeAlias

from ..events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    CustomEvent,
    EventStamp,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMCallStartEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ReactEvent,
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    ReactStartEvent,
    ToolCallArgumentsDeltaEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
    ToolCallStartEvent,
)

__all__ = [
    "ApprovalRequestEvent",
    "ApprovalResolvedEvent",
    "CustomEvent",
    "EventStamp",
    "LLMCallEndEvent",
    "LLMCallErrorEvent",
    "LLMCallStartEvent",
    "LLMChunkArriveEvent",
    "ReActEvent",
    "ReActEventType",
    "ReactEndEvent",
    "ReactIterationEndEvent",
    "ReactIterationStartEvent",
    "ReactStartEvent",
    "ToolCallArgumentsDeltaEvent",
    "ToolCallEndEvent",
    "ToolCallErrorEvent",
    "ToolCallStartEvent",
    "ToolCallsBatchEndEvent",
    "ToolCallsBatchStartEvent",
]

ReActEvent: TypeAlias = ReactEvent


class ReActEventType(StrEnum):
    """Event kinds under SimpleLLMFunc's enum names: ``event.kind == ReActEventType.REACT_END``.

    ``CUSTOM_EVENT`` is ``"custom"``, :class:`CustomEvent`'s ``kind``.
    """

    REACT_START = "react_start"
    REACT_ITERATION_START = "react_iteration_start"
    LLM_CALL_START = "llm_call_start"
    LLM_CHUNK_ARRIVE = "llm_chunk_arrive"
    LLM_CALL_END = "llm_call_end"
    LLM_CALL_ERROR = "llm_call_error"
    TOOL_CALLS_BATCH_START = "tool_calls_batch_start"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_ARGUMENTS_DELTA = "tool_call_arguments_delta"
    TOOL_CALL_END = "tool_call_end"
    TOOL_CALL_ERROR = "tool_call_error"
    TOOL_CALLS_BATCH_END = "tool_calls_batch_end"
    APPROVAL_REQUEST = "approval_request"
    APPROVAL_RESOLVED = "approval_resolved"
    REACT_ITERATION_END = "react_iteration_end"
    REACT_END = "react_end"
    CUSTOM_EVENT = "custom"
