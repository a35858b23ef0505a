"""Assemble streamed chat-completions tool-call deltas into whole tool calls.

Servers disagree on how they stream ``choices[0].delta.tool_calls``. :class:`ToolCallAssembler`
accepts every shape we have met and routes each delta to its call by, in order:

1. ``id`` and ``index`` - the call seen with that id at that index (llama.cpp repeats id and name
   in every delta). Otherwise a new call, even when the id was seen at another index (servers
   that reuse one id for several calls: the engine makes ids unique per transcript) or another id
   at this index (servers that put every call at index 0) - except that a call at this index
   that has no id yet takes it (the id may come after a first id-less fragment).
2. ``index`` alone - the latest call seen at its index (the standard shape: id and name in the
   first delta only; parallel calls interleave by index).
3. ``id`` alone - the latest call seen with that id; a new id starts a new call. Without indexes,
   calls that share an id cannot be told apart.
4. neither - the current (last touched) call.

A name arriving for a call that already has arguments starts a new call when routing was by
index alone or by nothing and the name differs or the arguments so far are a complete JSON value
(servers that send each call whole, with no id and no index). Otherwise a name equal to the name
so far is a repeat and is dropped, and a different one is a fragment and is appended (``"get_"``
then ``"weather"``). A fragment equal to the whole name so far (``"a"`` then ``"a"``) is
ambiguous and read as a repeat.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._messages import ToolCall
from ..exceptions import StreamError
from ._base import ToolCallDelta

__all__ = ["ToolCallAssembler", "parse_arguments"]


@dataclass(slots=True)
class _Call:
    """A call being assembled (mutable, private to the assembler)."""

    id: str | None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _arguments_text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    # Some servers (Ollama, some proxies) send the arguments already parsed.
    return json.dumps(value, ensure_ascii=False)


def _is_complete_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


class ToolCallAssembler:
    """Collect the tool-call deltas of one streamed reply and return the finished calls.

    Calls that arrive without any id get ``f"{id_prefix}{n}"``, ``n`` being the call's position
    in the reply. The default prefix is ``"call_"`` plus 12 random hex digits and ``"_"``, so
    generated ids stay unique across the turns of a conversation (a history may not reuse a
    tool-call id); pass ``id_prefix`` for deterministic ids.

    Args:
        id_prefix: Prefix of generated ids.
    """

    __slots__ = ("_by_id", "_by_id_index", "_by_index", "_calls", "_current", "_id_prefix")

    def __init__(self, id_prefix: str | None = None) -> None:
        self._id_prefix = id_prefix if id_prefix is not None else f"call_{uuid.uuid4().hex[:12]}_"
        self._calls: list[_Call] = []
        self._by_id: dict[str, int] = {}  # the latest call with the id
        self._by_index: dict[int, int] = {}  # the latest call at the index
        self._by_id_index: dict[tuple[str, int], int] = {}
        self._current: int | None = None

    def add(self, delta: Mapping[str, object]) -> ToolCallDelta | None:
        """Route one raw ``delta.tool_calls[i]`` entry to its call.

        Returns:
            The normalised delta: ``index`` is the call's position in the reply, ``id`` the
            server's id of the call when known, ``name`` the part of the name this delta added
            (``None`` for none or a repeat), ``arguments`` the argument fragment. ``None`` when the
            delta added nothing.

        Raises:
            StreamError: If ``delta`` is not a JSON object.
        """
        if not isinstance(delta, Mapping):
            raise StreamError(f"tool call delta is not an object: {type(delta).__name__}")
        call_id = _text(delta.get("id"))
        raw_index = delta.get("index")
        if not isinstance(raw_index, int) or isinstance(raw_index, bool):
            raw_index = None
        function = delta.get("function")
        if not isinstance(function, Mapping):
            function = {}
        name = _text(function.get("name"))
        arguments = _arguments_text(function.get("arguments"))
        if call_id is None and name is None and not arguments:
            return None  # a keep-alive or an index-only stub: nothing to route
        position, fresh = self._route(call_id, raw_index, name)
        self._current = position
        call = self._calls[position]
        added_name = self._merge_name(call, name)
        if arguments:
            call.arguments.append(arguments)
        if not (fresh or added_name or arguments):
            return None
        return ToolCallDelta(position, call.id, added_name, arguments)

    def finish(self) -> tuple[ToolCall, ...]:
        """Return the assembled calls in the order they started.

        Arguments that are empty (or only whitespace) become ``"{}"``; other arguments are kept
        verbatim, valid JSON or not (see :func:`parse_arguments`). Calling it again returns the
        same calls.

        Raises:
            StreamError: If a call never received a name.
        """
        taken = {c.id for c in self._calls if c.id is not None}
        calls: list[ToolCall] = []
        for position, call in enumerate(self._calls):
            if not call.name:
                raise StreamError(f"streamed tool call #{position} has no function name")
            call_id = call.id or self._generated_id(position, taken)
            arguments = "".join(call.arguments)
            calls.append(ToolCall(call_id, call.name, arguments if arguments.strip() else "{}"))
        return tuple(calls)

    def _route(
        self, call_id: str | None, raw_index: int | None, name: str | None
    ) -> tuple[int, bool]:
        """Return the position of the delta's call and whether the call is new to the caller."""
        if call_id is not None and raw_index is not None:
            known = self._by_id_index.get((call_id, raw_index))
            if known is not None:
                return known, False
            # The id may arrive after a first id-less fragment at the same index.
            at_index = self._by_index.get(raw_index)
            if (
                at_index is not None
                and self._calls[at_index].id is None
                and not self._starts_new(self._calls[at_index], name)
            ):
                self._calls[at_index].id = call_id
                self._by_id[call_id] = at_index
                self._by_id_index[call_id, raw_index] = at_index
                return at_index, True
            return self._new_call(call_id, raw_index), True
        if call_id is not None:
            known = self._by_id.get(call_id)
            if known is not None:
                return known, False
            return self._new_call(call_id, None), True
        position = self._current if raw_index is None else self._by_index.get(raw_index)
        if position is None or self._starts_new(self._calls[position], name):
            return self._new_call(None, raw_index), True
        return position, False

    def _starts_new(self, call: _Call, name: str | None) -> bool:
        if name is None or not call.arguments:
            return False
        return name != call.name or _is_complete_json("".join(call.arguments))

    def _new_call(self, call_id: str | None, raw_index: int | None) -> int:
        position = len(self._calls)
        self._calls.append(_Call(call_id))
        if call_id is not None:
            self._by_id[call_id] = position
        if raw_index is not None:
            self._by_index[raw_index] = position
            if call_id is not None:
                self._by_id_index[call_id, raw_index] = position
        return position

    @staticmethod
    def _merge_name(call: _Call, name: str | None) -> str | None:
        if name is None or name == call.name:
            return None
        call.name += name
        return name

    def _generated_id(self, position: int, taken: set[str]) -> str:
        candidate = f"{self._id_prefix}{position}"
        suffix = 0
        while candidate in taken:
            suffix += 1
            candidate = f"{self._id_prefix}{position}_{suffix}"
        taken.add(candidate)
        return candidate


def parse_arguments(raw: str) -> tuple[dict[str, Any] | None, str | None]:
    """Parse tool-call arguments, telling truncated JSON from invalid JSON.

    Empty (or whitespace-only) text means "no arguments" and parses to ``{}``: servers send it for
    tools without parameters. Nothing is ever repaired: the text parses as one JSON object or it
    is an error.

    Returns:
        ``(arguments, None)`` on success, else ``(None, message)`` where the message says whether
        the JSON looks truncated (it ends before the value is complete, e.g. the reply hit its
        token limit), is invalid, or is valid JSON that is not an object.
    """
    if raw == "{}" or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except RecursionError:
        return None, "tool arguments are not valid JSON: nested too deeply to parse"
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if _looks_truncated(raw, exc):
            return None, (
                f"tool arguments look truncated: the JSON ends before it is complete "
                f"({exc.msg} at {where}, {len(raw)} characters received)"
            )
        return None, f"tool arguments are not valid JSON: {exc.msg} at {where}"
    if not isinstance(value, dict):
        return None, (
            f"tool arguments must be a JSON object, got a JSON {_json_type(value)}"
            + (" (double-encoded JSON?)" if isinstance(value, str) else "")
        )
    return value, None


_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER_TAIL = re.compile(r"\.|[eE][+-]?")
_ESCAPE_TAIL = re.compile(r"u[0-9a-fA-F]{0,4}")


def _looks_truncated(raw: str, exc: json.JSONDecodeError) -> bool:
    """Whether the text is a prefix of some valid JSON (the parser ran out of input).

    The decoder stops at the token it could not finish; what is left from there tells an input
    that simply ends (nothing, a partial literal, number or escape) from one that is wrong.
    """
    if exc.msg.startswith("Unterminated string"):
        return True
    tail = raw[exc.pos :]
    if not tail.strip():
        return True
    if exc.msg == "Expecting value":
        return any(lit.startswith(tail) for lit in _LITERALS)
    if exc.msg.startswith("Expecting ',' delimiter"):
        return raw[exc.pos - 1 : exc.pos].isdigit() and _NUMBER_TAIL.fullmatch(tail) is not None
    if exc.msg.startswith("Invalid \\uXXXX escape"):
        return _ESCAPE_TAIL.fullmatch(tail) is not None
    return False


def _json_type(value: object) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "array"
    return "null"
