"""SimpleLLMFunc's ``type.message`` module: the chat message dict types.

A message here is a chat dict (``{"role": ..., "content": ...}``), as ``@llm_chat`` takes and
yields it; extra keys such as ``reasoning_details`` ride along.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = ["ExtendedMessageParam", "MessageList", "MessageParam", "ReasoningDetail"]


class ReasoningDetail(TypedDict):
    """One encrypted reasoning item some models (Gemini via OpenRouter) return."""

    id: str
    format: str
    index: int
    type: Literal["reasoning.encrypted"]
    data: str


class ExtendedMessageParam(TypedDict, total=False):
    """A chat message dict with the optional OpenAI fields and ``reasoning_details``."""

    role: str
    content: str | list[dict[str, Any]] | None
    refusal: NotRequired[str | None]
    annotations: NotRequired[list[dict[str, Any]] | None]
    audio: NotRequired[dict[str, Any] | None]
    function_call: NotRequired[dict[str, Any] | None]
    tool_calls: NotRequired[list[dict[str, Any]] | None]
    tool_call_id: NotRequired[str]
    reasoning_details: NotRequired[list[ReasoningDetail]]


#: One chat message dict.
MessageParam: TypeAlias = dict[str, Any]
#: A conversation: chat message dicts, as ``@llm_chat`` takes and yields it.
MessageList: TypeAlias = list[dict[str, Any]]
