"""Text that is not valid Unicode, at every wire boundary: each HTTP provider's, and the
edge of every app we serve (``serving/_edge.py``).

A Python string may hold lone surrogates (code points U+D800..U+DFFF that are not a high + low
pair): ``os.listdir()`` returns them for file names that are not UTF-8 (``b"bad\\xff"`` becomes
``"bad\\udcff"``), and ``json.loads`` returns one for a ``"\\ud83d"`` escape, which servers that
cut a string inside a UTF-16 pair send. UTF-8 cannot encode them, so such text in a tool result,
in tool arguments or in the model's own words would make every later request of the conversation
fail. The rule, in both directions:

* **Sent**: a lone surrogate goes on the wire as U+FFFD (the replacement character); a high + low
  pair held as two code points goes as the character it encodes. Only the request body changes:
  the caller's history keeps its text, and every later call sends it the same way.
* **Received**: a reply is valid Unicode. Invalid UTF-8 (a string cut inside a multi-byte
  character) and escaped lone surrogates arrive as U+FFFD, streamed or not. (Half a pair at the
  end of one stream event and the other half at the start of the next arrive as two U+FFFD in
  the deltas; the final reply has the character when the server sends the whole text there.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final, cast

__all__ = ["has_surrogate_escape", "loads_reply", "replace_surrogates", "replace_surrogates_in"]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# A JSON escape that decodes to a surrogate (an escaped backslash before it is a false alarm,
# which costs only a look at the decoded value).
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")
# The C scanner that JSONDecoder.raw_decode wraps (one Python frame less per stream chunk); it
# raises StopIteration where raw_decode raises "Expecting value".
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = cast(Any, json.JSONDecoder()).scan_once


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD and each surrogate pair joined into
    the character it encodes (``text`` itself when it has no surrogate)."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def replace_surrogates_in(value: Any) -> Any:
    """A decoded JSON ``value`` with :func:`replace_surrogates` applied to every string in it,
    object keys included."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, dict):
        return {replace_surrogates(k): replace_surrogates_in(v) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_surrogates_in(v) for v in value]
    return value


def has_surrogate_escape(data: str) -> bool:
    """Whether JSON text may decode to a surrogate (it has a ``\\uD800``-``\\uDFFF`` escape):
    the only way a JSON string read from UTF-8 gets one."""
    return "\\u" in data and _SURROGATE_ESCAPE.search(data) is not None


def loads_reply(data: str) -> Any:
    """Decode JSON a server sent, with lone surrogates replaced by U+FFFD in every string.

    Faster than ``json.loads`` in the common case (no regular-expression passes), for stream
    chunks; the surrogate check is one substring search unless the text has ``\\u`` escapes.

    Raises:
        ValueError: For invalid JSON or text after the value.
    """
    try:
        value, end = _SCAN(data, 0)
    except (StopIteration, ValueError):
        value = json.loads(data)  # e.g. leading whitespace; raises for really invalid JSON
    else:
        if end != len(data) and not data[end:].isspace():
            raise ValueError(f"extra data after the JSON value at {end}")
    if has_surrogate_escape(data):
        value = replace_surrogates_in(value)
    return value
