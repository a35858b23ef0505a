"""The text tool-call protocol: a table of realistic model outputs, all parsed correctly."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simplellmfunc.engine import TextAction, parse_reply, render_catalogue
from simplellmfunc.engine._text_protocol import to_text_transcript
from simplellmfunc.providers import ToolSpec
from simplellmfunc.types import AssistantMessage, ToolCall, ToolMessage, UserMessage

TOOLS = ["sum", "search", "get_weather", "read_file"]

# (model output, expected actions, expected terminate answer, expected source)
TABLE: list[tuple[str, list[TextAction], str | None, str]] = [
    # The seed's examples (001 §4.2).
    (
        'Let me calculate... ```json\n{"action": "sum", "input": {"numbers": [1,2,3]}}\n```',
        [TextAction("sum", {"numbers": [1, 2, 3]})],
        None,
        "json_block",
    ),
    (
        'I\'ll use the sum tool. {"action": "sum", "input": {"numbers": [1,2,3]}}',
        [TextAction("sum", {"numbers": [1, 2, 3]})],
        None,
        "inline_json",
    ),
    (
        '<action>sum</action><input>{"numbers": [1,2,3]}</input>',
        [TextAction("sum", {"numbers": [1, 2, 3]})],
        None,
        "xml",
    ),
    ("The answer is 42. Task complete.", [], None, "none"),
    # Nested objects and strings containing braces.
    (
        '```json\n{"action": "search", "input": '
        '{"query": "a {b} c", "filters": {"year": {"gte": 2020}}}}\n```',
        [TextAction("search", {"query": "a {b} c", "filters": {"year": {"gte": 2020}}})],
        None,
        "json_block",
    ),
    # Prose before and after inline JSON.
    (
        'Sure! First {"tool": "get_weather", "arguments": {"city": "Paris"}} '
        "and then I will report back.",
        [TextAction("get_weather", {"city": "Paris"})],
        None,
        "inline_json",
    ),
    # A batch as a JSON array.
    (
        '```json\n[{"action": "get_weather", "input": {"city": "Paris"}}, '
        '{"action": "get_weather", "input": {"city": "Rome"}}]\n```',
        [TextAction("get_weather", {"city": "Paris"}), TextAction("get_weather", {"city": "Rome"})],
        None,
        "json_block",
    ),
    # Arguments as a JSON string (OpenAI style function object).
    (
        '{"name": "read_file", "arguments": "{\\"path\\": \\"a.txt\\"}"}',
        [TextAction("read_file", {"path": "a.txt"})],
        None,
        "inline_json",
    ),
    # Explicit terminate.
    (
        '```json\n{"action": "terminate", "input": {"answer": "5050"}}\n```',
        [],
        "5050",
        "json_block",
    ),
    # A fence without a language tag.
    (
        'Calling now:\n```\n{"action": "sum", "input": {"numbers": [4, 5]}}\n```',
        [TextAction("sum", {"numbers": [4, 5]})],
        None,
        "json_block",
    ),
    # JSON in prose that is not a call (no action key) is a final answer.
    ('The config is {"debug": true, "level": 3}. That is all.', [], None, "none"),
    # Broken JSON inside a fence that tries to call a tool: a format error for the model.
    ('```json\n{"action": "sum", "input": {"numbers": [1,2,}\n```', [], None, "json_block"),
    # XML with whitespace and a terminate.
    (
        'Done.\n<action> terminate </action>\n<input>{"answer": "Paris"}</input>',
        [],
        "Paris",
        "xml",
    ),
    # Two XML calls.
    (
        '<action>search</action><input>{"query": "x"}</input>\n'
        '<action>read_file</action><input>{"path": "y"}</input>',
        [TextAction("search", {"query": "x"}), TextAction("read_file", {"path": "y"})],
        None,
        "xml",
    ),
    # A final answer that mentions a tool by name stays a final answer (heuristic off).
    ("I could use the search tool, but I already know: it is 7.", [], None, "none"),
    # Chinese prose around an inline call.
    (
        '我来计算一下：{"action": "sum", "input": {"numbers": [1, 2]}}，请稍等。',
        [TextAction("sum", {"numbers": [1, 2]})],
        None,
        "inline_json",
    ),
    # Input that is not an object is reported on the action.
    (
        '{"action": "sum", "input": [1, 2, 3]}',
        [TextAction("sum", {}, "the tool input must be a JSON object")],
        None,
        "inline_json",
    ),
    # The first fenced block wins over later prose JSON.
    (
        '```json\n{"action": "search", "input": {"query": "q"}}\n```\n'
        'Afterwards maybe {"action": "sum", "input": {}}',
        [TextAction("search", {"query": "q"})],
        None,
        "json_block",
    ),
]


@pytest.mark.parametrize(("text", "actions", "answer", "source"), TABLE)
def test_table(text: str, actions: list[TextAction], answer: str | None, source: str) -> None:
    parsed = parse_reply(text, TOOLS)
    assert list(parsed.actions) == actions
    assert parsed.terminate_answer == answer
    assert parsed.source == source


def test_table_is_large_enough() -> None:
    assert len(TABLE) >= 15


def test_broken_json_gives_a_format_error() -> None:
    parsed = parse_reply('```json\n{"action": "sum", "input": {"numbers": [1,2,}\n```', TOOLS)
    assert parsed.format_error is not None
    assert '"action"' in parsed.format_error


def test_keyword_heuristic_is_opt_in() -> None:
    text = "I need to use the search tool to find the capital of France"
    assert parse_reply(text, TOOLS).actions == ()
    parsed = parse_reply(text, TOOLS, keyword_heuristic=True)
    assert parsed.source == "keyword"
    assert parsed.actions[0].tool == "search"


def test_catalogue_names_every_tool_and_the_format() -> None:
    text = render_catalogue([ToolSpec("sum", "Add numbers.", {"type": "object"})])
    assert "- sum: Add numbers." in text
    assert '"action"' in text


def test_transcript_renders_calls_and_results_as_text() -> None:
    messages = (
        UserMessage("add"),
        AssistantMessage("thinking", (ToolCall("c1", "sum", '{"numbers": [1]}'),)),
        ToolMessage("c1", "1"),
    )
    rendered = to_text_transcript(messages)
    assert isinstance(rendered[1], AssistantMessage)
    assert '"action": "sum"' in (rendered[1].content or "")
    assert not rendered[1].tool_calls
    assert isinstance(rendered[2], UserMessage)
    assert rendered[2].content == "Observation (c1): 1"


@given(st.text())
def test_parser_never_crashes(text: str) -> None:
    parse_reply(text, TOOLS)
