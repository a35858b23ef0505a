"""The previous reply while the next LLM call is in flight: its raw JSON kept as text.

A run keeps its last complete reply (``RunState.last_response``, for
``RunResult.response``). While the next call waits for the model, that reply is needed
only if the call is aborted or fails into the fallback answer; yet its ``raw`` mapping, the
decoded JSON of the whole reply, is the largest thing a waiting session holds (3.7 KB of dicts,
lists and key strings a tool-call reply shares with nothing else, against some 600 bytes as
text). So for the call's duration ``raw`` is held as JSON text behind a read-only mapping that
decodes it on first access (:func:`park`), and a reply still parked when the call ends (aborted,
failed) gets its ``raw`` back as a plain dict (:func:`unpark`). A ``raw`` that does not survive
the JSON round trip unchanged is not parked.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from typing import Any

from ..providers import LLMResponse

__all__ = ["park", "unpark"]


class _RawText(Mapping[str, Any]):
    """A reply's raw JSON as text, decoded on first access (then kept decoded)."""

    __slots__ = ("_text", "_value")

    def __init__(self, text: str) -> None:
        self._text = text
        self._value: dict[str, Any] | None = None

    def decoded(self) -> dict[str, Any]:
        if self._value is None:
            self._value = json.loads(self._text)
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self.decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.decoded())

    def __len__(self) -> int:
        return len(self.decoded())

    def __repr__(self) -> str:
        return repr(self.decoded())


def park(response: LLMResponse | None) -> LLMResponse | None:
    """``response`` with its ``raw`` held as JSON text (the same response when it has none, or
    one the round trip would change)."""
    if response is None or type(response.raw) is not dict:
        return response
    raw = response.raw
    try:
        text = json.dumps(raw, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):  # not JSON: kept as it is
        return response
    if json.loads(text) != raw:  # tuples, keys that are not strings: kept as they are
        return response
    return dataclasses.replace(response, raw=_RawText(text))


def unpark(response: LLMResponse | None) -> LLMResponse | None:
    """A parked ``response`` with its ``raw`` back as a plain dict (others as they are)."""
    if response is None or not isinstance(response.raw, _RawText):
        return response
    return dataclasses.replace(response, raw=response.raw.decoded())
