"""SimpleLLMFunc's ``llm_decorator.llm_chat_decorator`` module: ``llm_chat``
(:func:`simplellmfunc.decorators.llm_chat`) and its older name ``async_llm_chat``."""

from ..decorators import llm_chat

__all__ = ["async_llm_chat", "llm_chat"]

async_llm_chat = llm_chat
