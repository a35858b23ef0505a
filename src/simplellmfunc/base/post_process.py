"""SimpleLLMFunc's ``base.post_process`` helpers, for the objects this library yields.

``extract_content_from_stream_response(event.chunk, name)`` reads the text of a streamed piece:
an :class:`~simplellmfunc.events.LLMChunkArriveEvent` (whose ``chunk`` is itself) or a provider
``TextDelta``; ``extract_content_from_response`` reads a provider ``LLMResponse``'s text.
"""

from __future__ import annotations

from typing import Any

__all__ = ["extract_content_from_response", "extract_content_from_stream_response"]


def _text_of(item: Any) -> str:
    if isinstance(item, str):
        return item
    text = getattr(item, "text", None)
    return text if isinstance(text, str) else ""


def extract_content_from_stream_response(chunk: Any, func_name: str = "") -> str:
    """The text of one streamed piece (``""`` for anything without text, such as a reasoning
    piece or a tool-call delta); ``func_name`` is accepted for SimpleLLMFunc's signature."""
    return _text_of(chunk)


def extract_content_from_response(response: Any, func_name: str = "") -> str:
    """The text of a whole reply (an ``LLMResponse``, or text); ``func_name`` is accepted for
    SimpleLLMFunc's signature."""
    return _text_of(response)
