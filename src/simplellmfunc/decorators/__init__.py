"""The decorators: ``llm_function`` (a typed call) and ``llm_chat`` (an agent with history)."""

from ._chat import llm_chat
from ._function import llm_function

__all__ = ["llm_chat", "llm_function"]
