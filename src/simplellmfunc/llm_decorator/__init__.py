"""SimpleLLMFunc's ``llm_decorator`` module: the two decorators (``async_llm_function`` and
``async_llm_chat`` are SimpleLLMFunc's older names for the same, async-only, decorators)."""

from __future__ import annotations

from ..decorators import llm_chat, llm_function

__all__ = ["async_llm_chat", "async_llm_function", "llm_chat", "llm_function"]

async_llm_function = llm_function
async_llm_chat = llm_chat
