"""The OpenAI Chat Completions adapter: :class:`OpenAICompatible` (``_adapter``) and its wire
format (``_wire``)."""

from ._adapter import OpenAICompatible

__all__ = ["OpenAICompatible"]
