"""simplellmfunc: typed async functions and tool-using agents, powered by LLMs.

``@llm_function`` turns a typed, docstring-only ``async def`` into a typed LLM call;
``@llm_chat`` turns one into a streaming, tool-using agent with history.
"""

from typing import TYPE_CHECKING, Any

from ._abort import AbortSignal
from ._content import ImgPath, ImgUrl, Text
from .decorators import llm_chat, llm_function
from .providers import (
    AnthropicCompatible,
    APIKeyPool,
    FallbackLLM,
    LLMInterface,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    TokenBucket,
    make_llm,
)
from .tools import Tool, ToolEventEmitter, tool

if TYPE_CHECKING:
    from .builtin import FileToolset, PyRepl, SelfReference
    from .mcp import MCPToolset

__all__ = [
    "APIKeyPool",
    "AbortSignal",
    "AnthropicCompatible",
    "FallbackLLM",
    "FileToolset",
    "ImgPath",
    "ImgUrl",
    "LLMInterface",
    "MCPToolset",
    "OpenAICompatible",
    "OpenAIResponsesCompatible",
    "PyRepl",
    "SelfReference",
    "Text",
    "TokenBucket",
    "Tool",
    "ToolEventEmitter",
    "llm_chat",
    "llm_function",
    "make_llm",
    "tool",
]

__version__ = "0.1.0"

_LAZY = {
    "FileToolset": "simplellmfunc.builtin",
    "MCPToolset": "simplellmfunc.mcp",
    "PyRepl": "simplellmfunc.builtin",
    "SelfReference": "simplellmfunc.builtin",
}


def __getattr__(name: str) -> Any:
    # Builtins pull in jupyter_client and friends; import them only when asked for.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'simplellmfunc' has no attribute {name!r}")
