"""The Anthropic Messages adapter: :class:`AnthropicCompatible` (``_adapter``), its wire format
(``_wire``) and its stream parser (``_parser``)."""

from ._adapter import AnthropicCompatible

__all__ = ["AnthropicCompatible"]
