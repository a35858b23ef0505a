"""A request body on its way to the wire: built on first use, encoded once, as compact JSON."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from .._unicode import replace_surrogates

__all__ = ["Body", "RequestBody", "encode_json"]

#: A request body, or a function that builds it (called once, when it is about to be sent).
Body = Mapping[str, Any] | Callable[[], Mapping[str, Any]]
# One encoder for every request: json.dumps with options builds a new encoder per call.
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_json(body: Mapping[str, object]) -> bytes:
    """A request body as compact UTF-8 JSON (non-ASCII characters kept, as the SDKs send).

    Text that UTF-8 cannot encode (lone surrogates, e.g. a file name from ``os.listdir()``
    that is not UTF-8) is sent with U+FFFD in its place; see :mod:`simplellmfunc._unicode`.
    """
    text = _ENCODE(body)
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Surrogates only occur inside JSON strings, so no pair forms across two of them.
        return replace_surrogates(text).encode()


class RequestBody:
    """A request body, built (when given as a function) and encoded once, on first use: a call
    queued for a connection slot (thousands of them, at scale) holds neither the wire body nor
    its JSON."""

    __slots__ = ("_body", "_encoded")

    def __init__(self, body: Body) -> None:
        self._body: Body | None = body
        self._encoded: bytes | None = None

    def encoded(self) -> bytes:
        """The body as UTF-8 JSON (built and encoded on the first call)."""
        if self._encoded is None:
            body, self._body = self._body, None
            assert body is not None
            self._encoded = encode_json(body() if callable(body) else body)
        return self._encoded
