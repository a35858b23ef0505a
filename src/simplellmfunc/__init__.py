"""simplellmfunc: typed async functions and tool-using agents, powered by LLMs.

``@llm_function`` turns a typed, docstring-only ``async def`` into a typed LLM call;
``@llm_chat`` turns one into a streaming, tool-using agent with history.

Every export loads its module on first access (``simplellmfunc._lazy``): importing the package
is cheap and has no side effects.
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from ._abort import AbortSignal, PauseSignal
    from ._content import ImgPath, ImgUrl, Text
    from .builtin import FileToolset, PyRepl, SelfReference
    from .decorators import llm_chat, llm_function
    from .engine import ApprovalDecision, EngineOptions, HistoryWindow, TerminationPolicy
    from .logger import app_log
    from .mcp import MCPToolset
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
    from .runtime.retrieval import create_rag
    from .tools import Tool, ToolEventEmitter, tool
    from .utils.tui import tui

__all__ = [
    "APIKeyPool",
    "AbortSignal",
    "AnthropicCompatible",
    "ApprovalDecision",
    "EngineOptions",
    "FallbackLLM",
    "FileToolset",
    "HistoryWindow",
    "ImgPath",
    "ImgUrl",
    "LLMInterface",
    "MCPToolset",
    "OpenAICompatible",
    "OpenAIResponsesCompatible",
    "PauseSignal",
    "PyRepl",
    "SelfReference",
    "TerminationPolicy",
    "Text",
    "TokenBucket",
    "Tool",
    "ToolEventEmitter",
    "app_log",
    "create_rag",
    "llm_chat",
    "llm_function",
    "make_llm",
    "tool",
    "tui",
]

__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "APIKeyPool": ".providers",
        "AbortSignal": "._abort",
        "AnthropicCompatible": ".providers",
        "ApprovalDecision": ".engine",
        "EngineOptions": ".engine",
        "FallbackLLM": ".providers",
        "FileToolset": ".builtin",
        "HistoryWindow": ".engine",
        "ImgPath": ".types",
        "ImgUrl": ".types",
        "LLMInterface": ".providers",
        "MCPToolset": ".mcp",
        "OpenAICompatible": ".providers",
        "OpenAIResponsesCompatible": ".providers",
        "PauseSignal": "._abort",
        "PyRepl": ".builtin",
        "SelfReference": ".builtin",
        "TerminationPolicy": ".engine",
        "Text": ".types",
        "TokenBucket": ".providers",
        "Tool": ".tools",
        "ToolEventEmitter": ".tools",
        "app_log": ".logger",
        "create_rag": ".runtime.retrieval",
        "llm_chat": ".decorators",
        "llm_function": ".decorators",
        "make_llm": ".providers",
        "tool": ".tools",
        "tui": ".utils.tui",
    },
)

publish(__name__, __all__)
del TYPE_CHECKING, lazy_exports, publish  # the namespace holds the public names only
