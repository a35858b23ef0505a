"""Prompt-prefix stability: the part of every request a provider can cache must not drift.

Providers cache a prompt by its prefix (tool catalogue, system prompt, earlier turns): a
timestamp or a shuffled tool list in that prefix makes every call a cache miss, and costs money.
:func:`prefix_drifts` checks the requests of one run (each request's catalogue and system
prompt against the first request of the same model and API, and a conversation's earlier turns
against the request before); :func:`compare_prefixes` checks two runs request by request. Each
drift names the first differing byte of the prefix as it goes over the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..exceptions import UserError

__all__ = ["PrefixDrift", "assert_stable_prefix", "compare_prefixes", "prefix_drifts"]

_EXCERPT: Final = 40
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class PrefixDrift:
    """Where the stable prefix of a request differs from the one it should repeat.

    Attributes:
        request: Index of the request that drifted.
        reference: Index of the request it was compared with (in the other run for
            :func:`compare_prefixes`).
        segment: The part that differs first: ``tools``, ``system``, ``messages[3]`` ...
        offset: The first differing byte, counted from the start of the prefix.
        expected: The reference's bytes around ``offset``.
        actual: This request's bytes around ``offset``.
    """

    request: int
    reference: int
    segment: str
    offset: int
    expected: str
    actual: str

    def __str__(self) -> str:
        return (
            f"request {self.request} vs {self.reference}: the stable prefix differs at byte "
            f"{self.offset} (in {self.segment}): "
            f"expected …{self.expected!r}…, got …{self.actual!r}…"
        )


def _body(request: Any) -> Mapping[str, Any]:
    body = getattr(request, "json", request)  # a RecordedRequest, or a body / fields dict
    if isinstance(body, Mapping) and isinstance(body.get("body"), Mapping):
        body = body["body"]  # request_fields() of a cassette
    if not isinstance(body, Mapping):
        raise UserError(f"not a request body: {type(request).__name__}")
    return body


def _segments(body: Mapping[str, Any]) -> tuple[list[tuple[str, bytes]], list[tuple[str, bytes]]]:
    """The request's catalogue segments (tools, system) and its turns, as wire bytes."""
    head: list[tuple[str, bytes]] = []
    if "tools" in body:
        head.append(("tools", _ENCODE(body["tools"]).encode()))
    for name in ("system", "instructions"):
        if name in body:
            head.append(("system", _ENCODE(body[name]).encode()))
    turns_raw = body.get("messages", body.get("input", []))
    if isinstance(turns_raw, str):
        turns_raw = [turns_raw]
    turns: list[tuple[str, bytes]] = []
    key = "messages" if "messages" in body else "input"
    for index, turn in enumerate(turns_raw if isinstance(turns_raw, list) else []):
        role = turn.get("role") if isinstance(turn, Mapping) else None
        encoded = (f"{key}[{index}]", _ENCODE(turn).encode())
        if role in ("system", "developer") and len(turns) == 0:
            head.append(("system", encoded[1]))
        else:
            turns.append(encoded)
    return head, turns


def _first_difference(
    expected: Sequence[tuple[str, bytes]], actual: Sequence[tuple[str, bytes]]
) -> tuple[str, int, str, str] | None:
    """``(segment, offset, expected excerpt, actual excerpt)`` of the first differing byte of
    ``expected`` within ``actual`` (``actual`` may be longer), or ``None``."""
    offset = 0
    for index, (label, data) in enumerate(expected):
        other_label, other = actual[index] if index < len(actual) else (label, b"")
        if data != other:
            at = next(
                (i for i, (a, b) in enumerate(zip(data, other, strict=False)) if a != b),
                min(len(data), len(other)),
            )
            lo = max(0, at - _EXCERPT // 2)
            return (
                label if label == other_label else f"{label} / {other_label}",
                offset + at,
                data[lo : at + _EXCERPT // 2].decode(errors="replace"),
                other[lo : at + _EXCERPT // 2].decode(errors="replace"),
            )
        offset += len(data)
    return None


def _group(body: Mapping[str, Any]) -> str:
    return str(body.get("model"))


def prefix_drifts(requests: Iterable[Any]) -> list[PrefixDrift]:
    """The drifts of one run's requests (bodies, ``RecordedRequest`` s or cassette requests).

    Every request's tool catalogue and system prompt must be byte-identical to those of the
    first request to the same model; a request that continues the conversation of an earlier
    one (same first turn, more turns) must repeat that request's turns byte for byte.
    """
    bodies = [_body(request) for request in requests]
    firsts: dict[str, int] = {}
    last_of_conversation: dict[tuple[str, bytes], int] = {}
    drifts: list[PrefixDrift] = []
    split = [_segments(body) for body in bodies]
    for index, body in enumerate(bodies):
        group = _group(body)
        head, turns = split[index]
        first = firsts.setdefault(group, index)
        if first != index:
            found = _first_difference(split[first][0], head)
            if found is None and len(split[first][0]) != len(head):
                found = ("tools / system", sum(len(d) for _, d in head), "", "(a segment added)")
            if found is not None:
                drifts.append(PrefixDrift(index, first, *found))
                continue
        if not turns:
            continue
        key = (group, turns[0][1])
        previous = last_of_conversation.get(key)
        last_of_conversation[key] = index
        if previous is None:
            continue
        earlier = split[previous][1]
        if len(earlier) >= len(turns):
            continue  # not a continuation (the same first turn asked again)
        found = _first_difference(earlier, turns)
        if found is not None:
            base = sum(len(data) for _, data in head)
            segment, offset, expected, actual = found
            drifts.append(PrefixDrift(index, previous, segment, base + offset, expected, actual))
    return drifts


def compare_prefixes(run: Sequence[Any], reference: Sequence[Any]) -> list[PrefixDrift]:
    """The drifts of ``run`` against ``reference`` (another run of the same code), request by
    request: everything but the last turn of each request must be byte-identical."""
    drifts: list[PrefixDrift] = []
    for index, (mine, theirs) in enumerate(zip(run, reference, strict=False)):
        head, turns = _segments(_body(mine))
        ref_head, ref_turns = _segments(_body(theirs))
        expected = ref_head + ref_turns[:-1]
        found = _first_difference(expected, head + turns)
        if found is not None:
            drifts.append(PrefixDrift(index, index, *found))
    return drifts


def assert_stable_prefix(requests: Iterable[Any], reference: Sequence[Any] | None = None) -> None:
    """Raise when :func:`prefix_drifts` (and, given a ``reference`` run,
    :func:`compare_prefixes`) finds a drift.

    Raises:
        AssertionError: Listing every drift.
    """
    requests = list(requests)
    drifts = prefix_drifts(requests)
    if reference is not None:
        drifts += compare_prefixes(requests, reference)
    if drifts:
        raise AssertionError("unstable prompt prefix:\n" + "\n".join(map(str, drifts)))
