"""The OpenAI Responses adapter: :class:`OpenAIResponsesCompatible` (``_adapter``) and its wire
format (``_wire``)."""

from ._adapter import OpenAIResponsesCompatible

__all__ = ["OpenAIResponsesCompatible"]
