"""SimpleLLMFunc's ``type.hooks`` module: the phases of a ReAct loop, the context of a hook
call, what a tool may return, and the history aliases.

These are plain data types for code that annotates with them; the loop here reports its phases
as typed events (:mod:`simplellmfunc.events`) and plugs hooks in as
:class:`simplellmfunc.engine.RunHook` objects.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, NotRequired, TypeAlias, TypedDict

from .._content import ImgPath, ImgUrl, Text
from .message import MessageList, MessageParam
from .tool_call import ToolCallArguments

__all__ = [
    "HistoryList",
    "HookContext",
    "Message",
    "Messages",
    "ReActPhase",
    "ToolCallEvent",
    "ToolCallEventList",
    "ToolResult",
]


class ReActPhase(StrEnum):
    """The steps of a ReAct loop."""

    REACT_LOOP_START = "react_loop_start"
    REACT_LOOP_COMPLETE = "react_loop_complete"
    INITIAL_LLM_CALL_START = "initial_llm_call_start"
    INITIAL_LLM_CALL_COMPLETE = "initial_llm_call_complete"
    TOOL_CALLS_BATCH_START = "tool_calls_batch_start"
    TOOL_CALL_START = "tool_call_start"
    TOOL_CALL_COMPLETE = "tool_call_complete"
    TOOL_CALLS_BATCH_COMPLETE = "tool_calls_batch_complete"
    ITERATION_START = "iteration_start"
    ITERATION_LLM_CALL_START = "iteration_llm_call_start"
    ITERATION_LLM_CALL_COMPLETE = "iteration_llm_call_complete"
    ITERATION_COMPLETE = "iteration_complete"
    FINAL_LLM_CALL_START = "final_llm_call_start"
    FINAL_LLM_CALL_COMPLETE = "final_llm_call_complete"

    def is_llm_call_phase(self) -> bool:
        """Whether this phase starts or ends an LLM call."""
        return "llm_call" in self.value

    def is_tool_call_phase(self) -> bool:
        """Whether this phase starts or ends a tool call or a batch of them."""
        return self.value.startswith("tool_call")

    def is_iteration_phase(self) -> bool:
        """Whether this phase belongs to an iteration after the first LLM call."""
        return self.value.startswith("iteration_")


class HookContext(TypedDict):
    """Where a hook is called from."""

    func_name: str
    trace_id: str
    iteration: int
    phase: ReActPhase
    start_time: datetime
    current_time: datetime
    extra: NotRequired[dict[str, Any]]


#: What a tool function may return: text, JSON, images, or text with an image.
ToolResult: TypeAlias = (
    str
    | dict[str, Any]
    | list[Any]
    | ImgPath
    | ImgUrl
    | tuple[str, ImgPath]
    | tuple[str, ImgUrl]
    | Text
)


class ToolCallEvent(TypedDict):
    """One finished tool call."""

    tool_name: str
    tool_call_id: str
    arguments: ToolCallArguments
    result: ToolResult
    execution_time: float
    error: NotRequired[Exception | None]
    context: HookContext


ToolCallEventList: TypeAlias = list[ToolCallEvent]
Message: TypeAlias = MessageParam
Messages: TypeAlias = MessageList
HistoryList: TypeAlias = MessageList
