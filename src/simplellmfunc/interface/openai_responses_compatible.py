"""SimpleLLMFunc's ``interface.openai_responses_compatible`` module:
:class:`~simplellmfunc.providers.OpenAIResponsesCompatible`."""

from ..providers import OpenAIResponsesCompatible

__all__ = ["OpenAIResponsesCompatible"]
