"""SimpleLLMFunc's ``interface`` package: the provider classes of :mod:`simplellmfunc.providers`
under their old module paths (``interface.openai_compatible.OpenAICompatible``,
``interface.llm_interface.LLM_Interface`` ...). Imported on first access."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._compat import compat_getattr
from .._lazy import publish

if TYPE_CHECKING:
    from ..providers import APIKeyPool, OpenAICompatible, OpenAIResponsesCompatible, TokenBucket
    from ..providers import LLMInterface as LLM_Interface

__all__ = [
    "APIKeyPool",
    "LLM_Interface",
    "OpenAICompatible",
    "OpenAIResponsesCompatible",
    "TokenBucket",
]

__getattr__ = compat_getattr(
    __name__,
    {
        "APIKeyPool": (".providers", "APIKeyPool"),
        "LLM_Interface": (".providers", "LLMInterface"),
        "OpenAICompatible": (".providers", "OpenAICompatible"),
        "OpenAIResponsesCompatible": (".providers", "OpenAIResponsesCompatible"),
        "TokenBucket": (".providers", "TokenBucket"),
    },
    {
        "RateLimitManager": "rate limits are per interface: TokenBucket, built from "
        "provider.json's rate_limit_capacity / rate_limit_refill_rate",
        "rate_limit_manager": "rate limits are per interface: TokenBucket",
    },
)

publish(__name__, __all__)
