"""SimpleLLMFunc's ``SimpleLLMFunc.type`` package: :mod:`simplellmfunc.types` plus the type
aliases and typed dicts SimpleLLMFunc code annotates with, in its submodules ``message``,
``multimodal``, ``tool_call``, ``llm`` and ``hooks``.

A history here is what ``@llm_chat`` takes and yields: a list of chat message dicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._compat import compat_getattr
from ..types import AssistantMessage, SystemMessage, ToolMessage, UserMessage
from .hooks import (
    HistoryList,
    HookContext,
    Message,
    Messages,
    ReActPhase,
    ToolCallEvent,
    ToolCallEventList,
    ToolResult,
)
from .llm import LLMUsage
from .message import ExtendedMessageParam, MessageList, MessageParam, ReasoningDetail
from .multimodal import ImgPath, ImgUrl, MultimodalContent, MultimodalList, Text
from .tool_call import (
    AccumulatedToolCall,
    ToolCall,
    ToolCallArguments,
    ToolCallFunction,
    ToolCallFunctionInfo,
    ToolDefinition,
    ToolDefinitionList,
    ToolFunctionDefinition,
    dict_to_tool_call,
    tool_call_to_dict,
)

if TYPE_CHECKING:
    from ..providers import LLMInterface as LLM_Interface
    from ..providers import LLMResponse
    from ..providers import StreamEvent as LLMStreamChunk

__all__ = [
    "AccumulatedToolCall",
    "AssistantMessage",
    "ExtendedMessageParam",
    "HistoryList",
    "HookContext",
    "ImgPath",
    "ImgUrl",
    "LLMResponse",
    "LLMStreamChunk",
    "LLMUsage",
    "LLM_Interface",
    "Message",
    "MessageList",
    "MessageParam",
    "Messages",
    "MultimodalContent",
    "MultimodalList",
    "ReActPhase",
    "ReasoningDetail",
    "SystemMessage",
    "Text",
    "ToolCall",
    "ToolCallArguments",
    "ToolCallEvent",
    "ToolCallEventList",
    "ToolCallFunction",
    "ToolCallFunctionInfo",
    "ToolDefinition",
    "ToolDefinitionList",
    "ToolFunctionDefinition",
    "ToolMessage",
    "ToolResult",
    "UserMessage",
    "dict_to_tool_call",
    "tool_call_to_dict",
]

__getattr__: Any = compat_getattr(
    __name__,
    {
        "LLM_Interface": (".providers", "LLMInterface"),
        "LLMResponse": (".providers", "LLMResponse"),
        "LLMStreamChunk": (".providers", "StreamEvent"),
    },
)
