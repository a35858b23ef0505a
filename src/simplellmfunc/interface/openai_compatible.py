"""SimpleLLMFunc's ``interface.openai_compatible`` module:
:class:`~simplellmfunc.providers.OpenAICompatible`."""

from ..providers import OpenAICompatible

__all__ = ["OpenAICompatible"]
