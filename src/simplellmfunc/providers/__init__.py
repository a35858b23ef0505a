"""Providers: the ``LLMInterface`` contract and adapters for model APIs.

Exports load on first access (see ``simplellmfunc._lazy``).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from ._anthropic import AnthropicCompatible
    from ._assembly import parse_arguments
    from ._base import (
        Capabilities,
        FinishEvent,
        LLMInterface,
        LLMRequest,
        LLMResponse,
        ReasoningDelta,
        ResponseFormat,
        StreamEvent,
        TextDelta,
        ToolCallDelta,
        ToolSpec,
        UsageEvent,
    )
    from ._claude_cli import ClaudeCodeCLI
    from ._config import env_settings, load_provider_json
    from ._embeddings import OpenAIEmbeddings
    from ._fallback import FallbackLLM
    from ._http import HTTPSettings
    from ._http_interface import HTTPInterface
    from ._keys import APIKeyPool
    from ._openai import OpenAICompatible
    from ._presets import PRESETS, Preset, make_llm
    from ._ratelimit import TokenBucket
    from ._redact import fingerprint, redact
    from ._responses import OpenAIResponsesCompatible
    from ._retry import RetryPolicy
    from ._tokens import count_message_tokens, count_text_tokens

__all__ = [
    "PRESETS",
    "APIKeyPool",
    "AnthropicCompatible",
    "Capabilities",
    "ClaudeCodeCLI",
    "FallbackLLM",
    "FinishEvent",
    "HTTPInterface",
    "HTTPSettings",
    "LLMInterface",
    "LLMRequest",
    "LLMResponse",
    "OpenAICompatible",
    "OpenAIEmbeddings",
    "OpenAIResponsesCompatible",
    "Preset",
    "ReasoningDelta",
    "ResponseFormat",
    "RetryPolicy",
    "StreamEvent",
    "TextDelta",
    "TokenBucket",
    "ToolCallDelta",
    "ToolSpec",
    "UsageEvent",
    "count_message_tokens",
    "count_text_tokens",
    "env_settings",
    "fingerprint",
    "load_provider_json",
    "make_llm",
    "parse_arguments",
    "redact",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "APIKeyPool": "._keys",
        "AnthropicCompatible": "._anthropic",
        "Capabilities": "._base",
        "ClaudeCodeCLI": "._claude_cli",
        "FallbackLLM": "._fallback",
        "FinishEvent": "._base",
        "HTTPInterface": "._http_interface",
        "HTTPSettings": "._http",
        "LLMInterface": "._base",
        "LLMRequest": "._base",
        "LLMResponse": "._base",
        "OpenAICompatible": "._openai",
        "OpenAIEmbeddings": "._embeddings",
        "OpenAIResponsesCompatible": "._responses",
        "PRESETS": "._presets",
        "Preset": "._presets",
        "ReasoningDelta": "._base",
        "ResponseFormat": "._base",
        "RetryPolicy": "._retry",
        "StreamEvent": "._base",
        "TextDelta": "._base",
        "TokenBucket": "._ratelimit",
        "ToolCallDelta": "._base",
        "ToolSpec": "._base",
        "UsageEvent": "._base",
        "count_message_tokens": "._tokens",
        "count_text_tokens": "._tokens",
        "env_settings": "._config",
        "fingerprint": "._redact",
        "load_provider_json": "._config",
        "make_llm": "._presets",
        "parse_arguments": "._assembly",
        "redact": "._redact",
    },
)

publish(__name__, __all__)
