"""JSON as types: what a request body, a JSON schema or a stored value may hold.

``JSONValue`` is what ``json.dumps`` writes; its containers are read-only (``Sequence``,
``Mapping``), so a ``list[Block]`` or a ``dict[str, str]`` built by a caller is a JSON value as
it stands. ``JSONObject`` is a JSON object being built (its own keys can be set). Code that
*reads* JSON it did not build narrows with ``isinstance``: a reply is not trusted to have the
shape it should.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JSONObject", "JSONValue"]

JSONValue: TypeAlias = (
    "str | int | float | bool | Sequence[JSONValue] | Mapping[str, JSONValue] | None"
)
JSONObject: TypeAlias = "dict[str, JSONValue]"
