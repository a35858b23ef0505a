"""SimpleLLMFunc's ``interface.token_bucket`` module:
:class:`~simplellmfunc.providers.TokenBucket`."""

from ..providers import TokenBucket

__all__ = ["TokenBucket"]
