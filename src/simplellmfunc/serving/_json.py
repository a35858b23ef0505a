"""The compact, JSON-safe form of events and results (what an app sends to a browser).

:func:`to_wire` turns an :class:`EventYield`, a :class:`ResponseYield` or a bare event into a flat
dict of JSON values: ``{"type": "event", "kind": ..., <the event's fields>, "origin": {...}}``.
Every field of the event dataclass is kept (new fields appear by themselves), under a size
policy (:class:`WirePolicy`): message lists become their count (and the last few messages),
long strings keep their head and tail, and ``accumulated_text`` (which grows with every chunk)
is left out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._events import EventOrigin, EventYield, ReactEvent, ResponseYield

__all__ = ["WirePolicy", "jsonable", "to_wire"]

#: Fields that hold whole message lists (the transcript), sent as a count and a tail.
_MESSAGE_FIELDS = frozenset({"messages", "final_messages"})


@dataclass(frozen=True, slots=True)
class WirePolicy:
    """How much of a large event goes on the wire.

    Attributes:
        max_messages: How many of the last messages of a message list are kept (``messages``
            of ``LLMCallStartEvent`` and ``ResponseYield``, ``final_messages`` of
            ``ReactEndEvent``); the list's length is always sent as ``<field>_count``.
            ``None``: every message.
        max_text_chars: Longer strings keep their head and tail around a marker saying how much
            was left out (``None``: no limit).
        accumulated_text: Keep ``LLMChunkArriveEvent.accumulated_text`` (the reply so far,
            resent with every chunk).
    """

    max_messages: int | None = 0
    max_text_chars: int | None = 4_000
    accumulated_text: bool = False


def to_wire(
    item: EventYield | ResponseYield | ReactEvent, policy: WirePolicy | None = None
) -> dict[str, Any]:
    """The JSON-safe dict of ``item`` under ``policy`` (default :class:`WirePolicy`).

    ``EventYield`` and bare events give ``{"type": "event", "kind", <fields>, "origin"}``
    (``origin`` holds only the fields that are set); a ``ResponseYield`` gives
    ``{"type": "response", "kind": "response", "response", "messages", "messages_count"}``.
    """
    policy = policy or WirePolicy()
    if isinstance(item, ResponseYield):
        out: dict[str, Any] = {"type": "response", "kind": "response"}
        out["response"] = jsonable(item.response, policy.max_text_chars)
        out.update(_messages("messages", item.messages, policy))
        return out
    event, origin = (item.event, item.origin) if isinstance(item, EventYield) else (item, None)
    out = {"type": "event", "kind": event.kind}
    for spec in dataclasses.fields(event):
        name = spec.name
        if name == "kind" or (name == "accumulated_text" and not policy.accumulated_text):
            continue
        value = getattr(event, name)
        if name in _MESSAGE_FIELDS:
            out.update(_messages(name, value, policy))
        else:
            out[name] = jsonable(value, policy.max_text_chars)
    out["origin"] = _origin(origin or EventOrigin())
    return out


def _origin(origin: EventOrigin) -> dict[str, Any]:
    """The fields of ``origin`` that differ from their defaults (``seq`` always)."""
    out: dict[str, Any] = {}
    for spec in dataclasses.fields(origin):
        value = getattr(origin, spec.name)
        if spec.name == "seq" or value != spec.default:
            out[spec.name] = value
    return out


def _messages(name: str, messages: Any, policy: WirePolicy) -> dict[str, Any]:
    items = list(messages or ())
    keep = items if policy.max_messages is None else items[len(items) - policy.max_messages :]
    if policy.max_messages == 0:
        keep = []
    return {name: jsonable(keep, policy.max_text_chars), f"{name}_count": len(items)}


def jsonable(value: Any, max_chars: int | None = None) -> Any:
    """``value`` as JSON values: dataclasses and mappings become dicts, sequences lists, bytes
    their size, anything else its ``str``; strings over ``max_chars`` keep their head and tail."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return _cut(value, max_chars)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), max_chars) for f in dataclasses.fields(value)
        }
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, max_chars) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, max_chars) for v in value]
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # a pydantic model
        return jsonable(dump(mode="json"), max_chars)
    return _cut(str(value), max_chars)


def _cut(text: str, max_chars: int | None) -> str:
    if max_chars is None or len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    left = len(text) - head - tail
    return f"{text[:head]}\n… [{left:,} characters left out] …\n{text[-tail:]}"
