"""Tool-call delta assembly in the shapes real servers send, and argument parsing."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from simplellmfunc._messages import ToolCall
from simplellmfunc.exceptions import StreamError
from simplellmfunc.providers._assembly import ToolCallAssembler, parse_arguments
from simplellmfunc.providers._base import ToolCallDelta


def assemble(deltas: list[dict[str, Any]]) -> tuple[ToolCall, ...]:
    assembler = ToolCallAssembler(id_prefix="call_")
    for delta in deltas:
        assembler.add(delta)
    return assembler.finish()


def first(index: int | None, call_id: str | None, name: str, arguments: str = "") -> dict[str, Any]:
    delta: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if index is not None:
        delta["index"] = index
    if call_id is not None:
        delta["id"] = call_id
    return delta


def more(index: int | None, arguments: str) -> dict[str, Any]:
    delta: dict[str, Any] = {"function": {"arguments": arguments}}
    if index is not None:
        delta["index"] = index
    return delta


# --- shapes --------------------------------------------------------------------------------------


def test_standard_shape() -> None:
    deltas = [first(0, "call_a", "get_weather"), more(0, '{"city": '), more(0, '"Paris"}')]
    assert assemble(deltas) == (ToolCall("call_a", "get_weather", '{"city": "Paris"}'),)


def test_standard_shape_returns_normalised_deltas() -> None:
    assembler = ToolCallAssembler()
    assert assembler.add(first(3, "call_a", "f")) == ToolCallDelta(0, "call_a", "f", "")
    assert assembler.add(more(3, '{"x"')) == ToolCallDelta(0, "call_a", None, '{"x"')
    assert assembler.add(more(3, ": 1}")) == ToolCallDelta(0, "call_a", None, ": 1}")
    assert assembler.add(first(7, "call_b", "g", "{}")) == ToolCallDelta(1, "call_b", "g", "{}")
    assert assembler.finish() == (
        ToolCall("call_a", "f", '{"x": 1}'),
        ToolCall("call_b", "g", "{}"),
    )


def test_id_and_name_repeated_in_every_delta() -> None:
    # llama.cpp: every delta repeats id, type and name next to the argument fragment.
    deltas = [
        first(0, "abc", "search", '{"q"'),
        first(0, "abc", "search", ': "a'),
        first(0, "abc", "search", 'b"}'),
        first(1, "def", "search", '{"q": "c"}'),
    ]
    assert assemble(deltas) == (
        ToolCall("abc", "search", '{"q": "ab"}'),
        ToolCall("def", "search", '{"q": "c"}'),
    )


def test_repeated_name_is_not_reported_again() -> None:
    assembler = ToolCallAssembler()
    assert assembler.add(first(0, "abc", "search", "{")) == ToolCallDelta(0, "abc", "search", "{")
    assert assembler.add(first(0, "abc", "search", "}")) == ToolCallDelta(0, "abc", None, "}")
    assert assembler.add(first(0, "abc", "search")) is None


def test_every_call_at_index_zero_with_different_ids() -> None:
    deltas = [
        first(0, "id1", "f"),
        more(0, '{"a": 1}'),
        first(0, "id2", "g"),
        more(0, '{"b": '),
        more(0, "2}"),
    ]
    assert assemble(deltas) == (ToolCall("id1", "f", '{"a": 1}'), ToolCall("id2", "g", '{"b": 2}'))


def test_one_id_at_several_indexes_is_several_calls() -> None:
    # Servers that reuse an id: the index tells the calls apart (the engine renames the ids).
    deltas = [
        first(0, "dup", "f"),
        more(0, '{"a": '),
        first(1, "dup", "g"),
        more(1, '{"b": 2}'),
        more(0, "1}"),
    ]
    assert assemble(deltas) == (ToolCall("dup", "f", '{"a": 1}'), ToolCall("dup", "g", '{"b": 2}'))


def test_one_id_at_several_indexes_repeated_in_every_delta() -> None:
    deltas = [
        first(0, "dup", "f", '{"a"'),
        first(1, "dup", "f", '{"b": 2}'),
        first(0, "dup", "f", ": 1}"),
    ]
    assert assemble(deltas) == (ToolCall("dup", "f", '{"a": 1}'), ToolCall("dup", "f", '{"b": 2}'))


def test_index_missing_routes_by_id() -> None:
    deltas = [
        first(None, "id1", "f", '{"a": '),
        first(None, "id2", "g", '{"b": '),
        {"id": "id1", "function": {"arguments": "1}"}},
        {"id": "id2", "function": {"arguments": "2}"}},
    ]
    assert assemble(deltas) == (ToolCall("id1", "f", '{"a": 1}'), ToolCall("id2", "g", '{"b": 2}'))


def test_index_and_id_missing_appends_to_current_call() -> None:
    deltas = [first(None, "id1", "f"), more(None, '{"a"'), more(None, ": 1}")]
    assert assemble(deltas) == (ToolCall("id1", "f", '{"a": 1}'),)


def test_no_id_at_all_generates_stable_ids() -> None:
    deltas = [first(0, None, "f"), first(1, None, "g"), more(1, "{}"), more(0, '{"x": 0}')]
    assert assemble(deltas) == (ToolCall("call_0", "f", '{"x": 0}'), ToolCall("call_1", "g", "{}"))


def test_generated_ids_are_unique_per_assembler_by_default() -> None:
    ids = set()
    for _ in range(3):
        assembler = ToolCallAssembler()
        assembler.add(first(0, None, "f", "{}"))
        (call,) = assembler.finish()
        assert call.id.startswith("call_")
        assert call.id == assembler.finish()[0].id  # stable
        ids.add(call.id)
    assert len(ids) == 3


def test_generated_id_never_collides_with_a_server_id() -> None:
    deltas = [first(0, None, "f", "{}"), first(1, "call_0", "g", "{}")]
    calls = assemble(deltas)
    assert [c.id for c in calls] == ["call_0_1", "call_0"]


def test_parallel_calls_interleaved_by_index() -> None:
    deltas = [
        first(0, "a", "get_weather"),
        first(1, "b", "get_weather"),
        more(1, '{"city": "Ber'),
        more(0, '{"city": "Par'),
        more(0, 'is"}'),
        more(1, 'lin"}'),
    ]
    assert assemble(deltas) == (
        ToolCall("a", "get_weather", '{"city": "Paris"}'),
        ToolCall("b", "get_weather", '{"city": "Berlin"}'),
    )


def test_two_parallel_calls_of_the_same_tool_never_merge() -> None:
    deltas = [first(0, "a", "f", "{}"), first(1, "b", "f", "{}")]
    assert assemble(deltas) == (ToolCall("a", "f", "{}"), ToolCall("b", "f", "{}"))


def test_whole_calls_without_id_or_index_stay_apart() -> None:
    # Servers that send each call whole in one delta, with neither id nor index.
    deltas = [first(None, None, "f", '{"n": 1}'), first(None, None, "f", '{"n": 2}')]
    deltas.append(first(None, None, "g", "{}"))
    assert assemble(deltas) == (
        ToolCall("call_0", "f", '{"n": 1}'),
        ToolCall("call_1", "f", '{"n": 2}'),
        ToolCall("call_2", "g", "{}"),
    )


def test_split_name_is_concatenated() -> None:
    deltas = [first(0, "a", "get_"), {"index": 0, "function": {"name": "weather"}}, more(0, "{}")]
    assert assemble(deltas) == (ToolCall("a", "get_weather", "{}"),)


def test_name_fragment_equal_to_the_name_so_far_reads_as_a_repeat() -> None:
    # Documented ambiguity: "a" + "a" could be "aa"; servers that repeat names are more common.
    deltas = [first(0, "x", "a"), {"index": 0, "function": {"name": "a"}}, more(0, "{}")]
    assert assemble(deltas) == (ToolCall("x", "a", "{}"),)


def test_id_arriving_after_first_fragment_is_adopted() -> None:
    deltas = [first(0, None, "f"), {"index": 0, "id": "late", "function": {"arguments": "{}"}}]
    assert assemble(deltas) == (ToolCall("late", "f", "{}"),)


def test_parsed_arguments_are_serialised() -> None:
    deltas = [{"index": 0, "id": "a", "function": {"name": "f", "arguments": {"x": "é"}}}]
    assert assemble(deltas) == (ToolCall("a", "f", '{"x": "é"}'),)


def test_empty_arguments_become_an_empty_object() -> None:
    assert assemble([first(0, "a", "f")]) == (ToolCall("a", "f", "{}"),)
    assert assemble([first(0, "a", "f", "  ")]) == (ToolCall("a", "f", "{}"),)


def test_invalid_arguments_are_kept_verbatim() -> None:
    assert assemble([first(0, "a", "f", '{"x": ')]) == (ToolCall("a", "f", '{"x": '),)


@pytest.mark.parametrize(
    "delta",
    [{}, {"index": 0}, {"index": 0, "type": "function"}, {"index": 0, "function": None}],
)
def test_deltas_without_content_are_ignored(delta: dict[str, Any]) -> None:
    assembler = ToolCallAssembler()
    assert assembler.add(delta) is None
    assert assembler.finish() == ()


def test_garbage_fields_are_ignored() -> None:
    deltas = [{"index": True, "id": 5, "function": {"name": "f", "arguments": "{}"}}]
    assert assemble(deltas) == (ToolCall("call_0", "f", "{}"),)


def test_non_object_delta_is_a_stream_error() -> None:
    with pytest.raises(StreamError, match="not an object"):
        ToolCallAssembler().add(["nope"])  # type: ignore[arg-type]


def test_call_without_name_is_a_stream_error() -> None:
    assembler = ToolCallAssembler()
    assembler.add({"index": 0, "id": "a", "function": {"arguments": "{}"}})
    with pytest.raises(StreamError, match="no function name"):
        assembler.finish()


# --- property test: every shape, random fragments ---------------------------------------------

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,15}", fullmatch=True)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
_arguments = st.builds(
    lambda obj, ascii_: json.dumps(obj, ensure_ascii=ascii_),
    st.dictionaries(st.text(max_size=6), _json_values, max_size=4),
    st.booleans(),
)
_calls = st.lists(st.tuples(_names, _arguments), min_size=1, max_size=4)

SHAPES = ("standard", "llama_cpp", "index_zero", "no_index", "no_id", "whole_no_id", "split_name")
INTERLEAVABLE = {"standard", "llama_cpp", "no_id", "split_name"}
SHARED_ID = {"standard", "llama_cpp", "split_name"}  # one id for every call: told apart by index


def _fragments(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=5)))
    bounds = [0, *(c for c in cuts if c < len(text)), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _name_fragments(draw: st.DrawFn, name: str) -> list[str]:
    parts = _fragments(draw, name)
    so_far = ""
    for part in parts:
        # A fragment equal to the whole name so far is read as a repeat (documented ambiguity).
        assume(part != so_far)
        so_far += part
    return parts


def _call_deltas(
    draw: st.DrawFn, shape: str, n: int, call_id: str, name: str, arguments: str
) -> list[dict[str, Any]]:
    frags = _fragments(draw, arguments)
    if shape == "standard":
        return [first(n, call_id, name)] + [more(n, f) for f in frags]
    if shape == "llama_cpp":
        return [first(n, call_id, name, f) for f in frags]
    if shape == "index_zero":
        return [first(0, call_id, name)] + [more(0, f) for f in frags]
    if shape == "no_index":
        return [first(None, call_id, name)] + [more(None, f) for f in frags]
    if shape == "no_id":
        return [first(n, None, name)] + [more(n, f) for f in frags]
    if shape == "whole_no_id":
        return [first(None, None, name, frags[0])] + [more(None, f) for f in frags[1:]]
    parts = _name_fragments(draw, name)
    head = [first(n, call_id, parts[0])]
    return (
        head
        + [{"index": n, "function": {"name": p}} for p in parts[1:]]
        + [more(n, f) for f in frags]
    )


@st.composite
def _scenarios(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[ToolCall]]:
    shape = draw(st.sampled_from(SHAPES))
    calls = draw(_calls)
    has_ids = shape not in ("no_id", "whole_no_id")
    ids = [f"srv_{n}_{draw(st.integers(0, 999))}" for n in range(len(calls))]
    if shape in SHARED_ID and draw(st.booleans()):
        ids = ["dup"] * len(calls)
    per_call = [
        _call_deltas(draw, shape, n, ids[n], name, arguments)
        for n, (name, arguments) in enumerate(calls)
    ]
    if shape in INTERLEAVABLE and draw(st.booleans()):
        deltas, order = _interleave(draw, per_call)
    else:
        deltas, order = [d for ds in per_call for d in ds], list(range(len(calls)))
    expected = []
    for position, n in enumerate(order):
        name, arguments = calls[n]
        expected.append(ToolCall(ids[n] if has_ids else f"call_{position}", name, arguments))
    return deltas, expected


def _interleave(
    draw: st.DrawFn, per_call: list[list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[int]]:
    queues = [list(ds) for ds in per_call]
    deltas: list[dict[str, Any]] = []
    order: list[int] = []  # calls in the order their first delta appears
    while any(queues):
        n = draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        if n not in order:
            order.append(n)
        deltas.append(queues[n].pop(0))
    return deltas, order


@settings(max_examples=400, deadline=None)
@given(scenario=_scenarios())
def test_every_shape_reassembles_the_original_calls(
    scenario: tuple[list[dict[str, Any]], list[ToolCall]],
) -> None:
    deltas, expected = scenario
    assembler = ToolCallAssembler(id_prefix="call_")
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for delta in deltas:
        out = assembler.add(delta)
        if out is not None:
            names[out.index] = names.get(out.index, "") + (out.name or "")
            arguments[out.index] = arguments.get(out.index, "") + out.arguments
    calls = assembler.finish()
    assert list(calls) == expected
    # The normalised deltas alone tell the same story as the finished calls.
    assert [names[i] for i in range(len(calls))] == [c.name for c in calls]
    assert [arguments[i] for i in range(len(calls))] == [c.arguments for c in calls]


# --- parse_arguments -----------------------------------------------------------------------------


def test_parse_object() -> None:
    assert parse_arguments('{"a": [1, 2], "b": null}') == ({"a": [1, 2], "b": None}, None)


@pytest.mark.parametrize("raw", ["", "   ", "\n"])
def test_parse_empty_means_no_arguments(raw: str) -> None:
    assert parse_arguments(raw) == ({}, None)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ("[1, 2]", "array"),
        ('"text"', "string"),
        ("3", "number"),
        ("1.5", "number"),
        ("true", "boolean"),
        ("null", "null"),
    ],
)
def test_parse_rejects_non_objects(raw: str, kind: str) -> None:
    value, error = parse_arguments(raw)
    assert value is None
    assert error == f"tool arguments must be a JSON object, got a JSON {kind}" + (
        " (double-encoded JSON?)" if kind == "string" else ""
    )


def test_parse_does_not_unwrap_double_encoded_json() -> None:
    value, error = parse_arguments(json.dumps('{"a": 1}'))
    assert value is None
    assert error is not None
    assert "double-encoded" in error


@pytest.mark.parametrize(
    "raw",
    [
        '{"a": 1',
        '{"a": "unterminated',
        '{"a": [1, 2',
        '{"a": tr',
        '{"a": -',
        '{"a": 1.',
        '{"a": 1e',
        '{"a": 1.5e+',
        '{"a": "\\u12',
        '{"a": "x\\u1234',
        '{"a": "x\\',
        '{"a"',
        '{"a": ',
        "{",
        '{"a": {"b": [',
    ],
)
def test_parse_reports_truncation(raw: str) -> None:
    value, error = parse_arguments(raw)
    assert value is None
    assert error is not None
    assert error.startswith("tool arguments look truncated")


@pytest.mark.parametrize(
    "raw",
    [
        "{'a': 1}",
        '{"a": 1,}',
        '{"a": 1}}',
        '{"a": 1}{"b": 2}',
        '{"a": x}',
        '{"a": tru}',
        '{"a": 1.5 e',
        '{"a": "\\x"}',
        '{"a": "\\u12"}',
        "not json",
        '{"a": tru ',
    ],
)
def test_parse_reports_invalid_json(raw: str) -> None:
    value, error = parse_arguments(raw)
    assert value is None
    assert error is not None
    assert error.startswith("tool arguments are not valid JSON")


def test_parse_survives_absurd_nesting() -> None:
    assert parse_arguments('{"a": ' + "[" * 100_000) == (
        None,
        "tool arguments are not valid JSON: nested too deeply to parse",
    )
    assembler = ToolCallAssembler()
    assembler.add(first(None, None, "f", "[" * 100_000))
    assembler.add(first(None, None, "g", "{}"))
    assert [c.name for c in assembler.finish()] == ["f", "g"]


@settings(max_examples=200, deadline=None)
@given(raw=_arguments, data=st.data())
def test_every_proper_prefix_reads_as_truncated(raw: str, data: st.DataObject) -> None:
    assert parse_arguments(raw) == (json.loads(raw), None)
    cut = data.draw(st.integers(1, len(raw) - 1))
    value, error = parse_arguments(raw[:cut])
    assert value is None
    assert error is not None
    assert error.startswith("tool arguments look truncated")
