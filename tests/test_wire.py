"""Events on the wire: to_wire's JSON form and size policy, the SSE encoder, the AG-UI adapter
(our stream parsed with ag-ui-protocol's own models)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from ag_ui.core import Event, EventType
from pydantic import TypeAdapter

from simplellmfunc import OpenAICompatible, ToolEventEmitter, llm_chat, tool
from simplellmfunc.events import (
    CustomEvent,
    EventOrigin,
    EventYield,
    ReactEndEvent,
    ReactStartEvent,
    ResponseYield,
)
from simplellmfunc.serving import AGUIAdapter, WirePolicy, agui_sse_stream, encode_sse, to_wire
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import Usage


@tool
async def run_cell(code: str, event_emitter: ToolEventEmitter) -> str:
    """Pretend to run a cell: its output streams as kernel_stdout events.

    Args:
        code: The code.
    """
    await event_emitter.emit("kernel_stdout", {"text": "line 1\n"})
    await event_emitter.emit("kernel_input_request", {"request_id": "r1", "prompt": "? "})
    return "x" * 10_000  # a large result


@pytest.fixture
async def items(mock_server: MockLLMServer) -> AsyncIterator[list[Any]]:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("run_cell", {"code": "print(1)"})),
        Reply.text("All done, here is the answer.", chunks=4),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[run_cell], stream=True, enable_event=True)
        async def agent(message: str, history: list | None = None):
            """Run code."""

        yield [i async for i in agent("go", history=[], _session_id="user-7")]


def test_every_item_is_compact_json(items: list[Any]) -> None:
    wire = [to_wire(i) for i in items]
    text = json.dumps(wire)  # JSON-safe as it is
    assert "x" * 5000 not in text  # the large result is cut to its head and tail
    kinds = [w["kind"] for w in wire]
    assert kinds[0] == "react_start"
    assert kinds[-1] == "response"
    assert all(w["origin"]["session_id"] == "user-7" for w in wire if w["type"] == "event")
    start = next(w for w in wire if w["kind"] == "llm_call_start")
    assert start["messages"] == []  # the message list goes as a count
    assert start["messages_count"] == 2
    chunk = next(w for w in wire if w["kind"] == "llm_chunk_arrive")
    assert "accumulated_text" not in chunk
    result = next(w for w in wire if w["kind"] == "tool_call_end")["result"]
    assert "characters left out" in result
    assert len(result) < 4_200
    custom = next(w for w in wire if w["kind"] == "custom")
    assert custom["data"] == {"text": "line 1\n"}
    assert custom["origin"]["tool_name"] == "run_cell"
    end = next(w for w in wire if w["kind"] == "react_end")
    assert end["total_usage"]["prompt_tokens"] >= 0
    assert wire[-1]["messages_count"] == len(items[-1].messages)


def test_policy_keeps_what_it_is_asked_to(items: list[Any]) -> None:
    policy = WirePolicy(max_messages=None, max_text_chars=None, accumulated_text=True)
    wire = [to_wire(i, policy) for i in items]
    start = next(w for w in wire if w["kind"] == "llm_call_start")
    assert [m["role"] for m in start["messages"]] == ["system", "user"]
    assert "x" * 10_000 in json.dumps(wire)
    last_two = to_wire(items[-1], WirePolicy(max_messages=2, max_text_chars=None))["messages"]
    assert last_two == items[-1].messages[-2:]


def test_sse_encoding() -> None:
    assert encode_sse({"a": 1}) == 'data: {"a":1}\n\n'
    assert encode_sse("two\nlines", event="note", id="3") == (
        "event: note\nid: 3\ndata: two\ndata: lines\n\n"
    )


async def test_agui_stream_parses_with_the_protocol_models(mock_server: MockLLMServer) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("run_cell", {"code": "print(1)"})),
        Reply.text("All done.", chunks=3),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[run_cell], stream=True, enable_event=True)
        async def agent(message: str, history: list | None = None):
            """Run code."""

        frames = [f async for f in agui_sse_stream(agent("go", history=[], _session_id="s1"))]
    parse = TypeAdapter(Event).validate_json
    events = [parse(frame.removeprefix("data: ")) for frame in frames]
    types = [e.type for e in events]
    assert types[0] == EventType.RUN_STARTED
    assert types[-1] == EventType.RUN_FINISHED
    assert events[0].thread_id == "s1"
    assert events[-1].result["text"] == "All done."
    tool_events = [t for t in types if t.name.startswith("TOOL_CALL")]
    assert tool_events == [
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
    ]
    text = "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert text == "All done."
    assert types.count(EventType.TEXT_MESSAGE_START) == types.count(EventType.TEXT_MESSAGE_END)
    customs = {e.name: e.value for e in events if e.type == EventType.CUSTOM}
    assert customs["kernel_stdout"]["data"] == {"text": "line 1\n"}
    assert customs["kernel_input_request"]["data"]["request_id"] == "r1"
    assert customs["kernel_stdout"]["tool_name"] == "run_cell"


@tool
async def broken(code: str) -> str:
    """Fail like a cell that raised.

    Args:
        code: The code.
    """
    raise TypeError("object of type 'int' has no len()")


async def test_agui_draws_a_failed_tool_call_as_failed(mock_server: MockLLMServer) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("broken", {"code": "len(5)"})), Reply.text("Sorry.")
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[broken, run_cell], stream=True, enable_event=True)
        async def agent(message: str, history: list | None = None):
            """Run code."""

        frames = [f async for f in agui_sse_stream(agent("go", history=[], _session_id="s2"))]
    parse = TypeAdapter(Event).validate_json
    events = [parse(frame.removeprefix("data: ")) for frame in frames]
    (result,) = [e for e in events if e.type == EventType.TOOL_CALL_RESULT]
    assert result.metadata == {"success": False}
    assert "TypeError: object of type 'int' has no len()" in result.content
    (error,) = [e for e in events if e.type == EventType.CUSTOM and e.name == "tool_call_error"]
    assert error.value["tool_call_id"] == result.tool_call_id
    assert error.value["data"]["error_type"] == "TypeError"


def test_agui_fork_origins_are_subagents_and_state() -> None:
    root = EventOrigin("s1", "root", 1)
    fork = EventOrigin("s1", "child", 1, "root", "fork_1", 1)
    adapter = AGUIAdapter()
    stream = [
        EventYield(ReactStartEvent("hi"), root),
        EventYield(ReactStartEvent("sub task"), fork),
        EventYield(CustomEvent("kernel_stdout", {"text": "in fork"}, "execute_code", "c1"), fork),
        EventYield(ReactEndEvent("fork done", (), Usage(), 1, 0, 0.1), fork),
        EventYield(ReactEndEvent("done", (), Usage(), 1, 0, 0.2), root),
        ResponseYield("done", []),
    ]
    events = [e for item in stream for e in adapter.convert(item)]
    parse = TypeAdapter(Event).validate_json
    events = [parse(e.model_dump_json(by_alias=True)) for e in events]
    types = [e.type for e in events]
    assert EventType.SUBAGENT_STARTED in types
    assert EventType.SUBAGENT_FINISHED in types
    deltas = [e.delta for e in events if e.type == EventType.STATE_DELTA]
    assert deltas[0][0]["path"] == "/forks/fork_1"
    assert deltas[0][0]["value"]["parent_call_id"] == "root"
    assert deltas[1][0]["value"] == "answer"
    custom = next(e for e in events if e.type == EventType.CUSTOM)
    assert custom.subagent_run_id == "child"  # the fork's events are tagged with its call id
