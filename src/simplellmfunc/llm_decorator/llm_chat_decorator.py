"""SimpleLLMFunc's ``llm_decorator.llm_chat_decorator`` module: ``llm_chat``
(:func:`simplellmfunc.decorators.llm_chat`), its older name ``async_llm_chat``, and
``DEFAULT_MAX_TOOL_CALLS`` (its ``max_tool_calls`` default: ``None``, no cap)."""

from __future__ import annotations

import inspect

from ..decorators import llm_chat

__all__ = ["DEFAULT_MAX_TOOL_CALLS", "async_llm_chat", "llm_chat"]

async_llm_chat = llm_chat

DEFAULT_MAX_TOOL_CALLS: int | None = (
    inspect.signature(llm_chat).parameters["max_tool_calls"].default
)
