"""Renders ``/v1/embeddings`` (OpenAI's shape) with deterministic vectors, unscripted.

Each input is split into lower-case words; each word adds 1 to one of ``dimensions`` slots
(chosen by a stable hash of the word, with a small suffix-stripping so ``parsing`` and
``parse`` meet), and the vector is normalised to length 1. Texts sharing words get a high
cosine, texts sharing none get 0: enough for a real dense or hybrid search to find something in
tests, with no model. ``dimensions`` in the request sets the size (default 64), as OpenAI's
API allows.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any, Final

from ._script import RecordedRequest, Reply
from ._wire import JsonBody, Rendered, json_bytes

__all__ = ["EmbeddingsRenderer", "hashed_embedding"]

DEFAULT_DIMENSIONS: Final = 64
_WORD: Final = re.compile(r"[a-z0-9]+")
_SUFFIXES: Final = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    """A crude stem: ``parse``, ``parses``, ``parsed`` and ``parsing`` all give ``pars``."""
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def hashed_embedding(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The mock server's vector of ``text``: hashed bag of words, length 1 (zeros if no word)."""
    vector = [0.0] * dimensions
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(_stem(word).encode(), digest_size=8).digest()
        vector[int.from_bytes(digest, "little") % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector


def _error(message: str) -> JsonBody:
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return JsonBody(400, json_bytes({"error": error}))


class EmbeddingsRenderer:
    """``{"data": [{"object": "embedding", "index": i, "embedding": [...]}], "usage": ...}``;
    answered without consuming a scripted reply (``scripted = False``)."""

    scripted = False

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Embed the request's ``input`` (a string or a list of strings)."""
        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return _error("'input' must be a string or a non-empty list of strings")
        size = body.get("dimensions", DEFAULT_DIMENSIONS)
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 4096:
            return _error("'dimensions' must be an integer from 1 to 4096")
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_embedding(t, size)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(_WORD.findall(t.lower())) for t in texts)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        answer = {"object": "list", "data": data, "model": body.get("model", ""), "usage": usage}
        return JsonBody(200, json_bytes(answer))
