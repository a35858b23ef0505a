"""SimpleLLMFunc's ``interface.key_pool`` module:
:class:`~simplellmfunc.providers.APIKeyPool`."""

from ..providers import APIKeyPool

__all__ = ["APIKeyPool"]
