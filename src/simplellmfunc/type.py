"""SimpleLLMFunc's ``SimpleLLMFunc.type`` module name: :mod:`simplellmfunc.types` plus the
type aliases SimpleLLMFunc code annotates with.

A history here is what ``@llm_chat`` takes and yields: a list of chat message dicts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

from ._compat import compat_getattr
from .types import (
    AssistantMessage,
    ImgPath,
    ImgUrl,
    Message,
    SystemMessage,
    Text,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)

if TYPE_CHECKING:
    from .providers import LLMInterface as LLM_Interface
    from .providers import LLMResponse

__all__ = [
    "AssistantMessage",
    "HistoryList",
    "ImgPath",
    "ImgUrl",
    "LLMResponse",
    "LLMUsage",
    "LLM_Interface",
    "Message",
    "MessageList",
    "MessageParam",
    "Messages",
    "MultimodalList",
    "SystemMessage",
    "Text",
    "ToolCall",
    "ToolMessage",
    "UserMessage",
]

#: One chat message dict (``{"role": ..., "content": ...}``).
MessageParam: TypeAlias = dict[str, Any]
#: A conversation: chat message dicts, as ``@llm_chat`` takes and yields it.
MessageList: TypeAlias = list[dict[str, Any]]
HistoryList: TypeAlias = list[dict[str, Any]]
Messages: TypeAlias = list[dict[str, Any]]
#: Text and images, in the order a model reads them.
MultimodalList: TypeAlias = list[Text | ImgUrl | ImgPath]
LLMUsage = Usage

__getattr__ = compat_getattr(
    __name__,
    {"LLM_Interface": (".providers", "LLMInterface"), "LLMResponse": (".providers", "LLMResponse")},
    {
        "LLMStreamChunk": "streamed pieces arrive as LLMChunkArriveEvent (.text) with "
        "enable_event=True, or as provider stream events with return_mode='raw'",
        "HookContext": "run hooks are simplellmfunc.engine.RunHook",
        "ReActPhase": "run hooks are simplellmfunc.engine.RunHook",
    },
)
