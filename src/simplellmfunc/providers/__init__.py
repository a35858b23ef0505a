"""Providers: the ``LLMInterface`` contract and adapters for model APIs."""

from ._anthropic import AnthropicCompatible
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
from ._fallback import FallbackLLM
from ._http import HTTPSettings
from ._http_interface import HTTPInterface
from ._keys import APIKeyPool
from ._openai import OpenAICompatible
from ._presets import PRESETS, Preset, make_llm
from ._ratelimit import TokenBucket
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
    "make_llm",
]
