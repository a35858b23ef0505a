"""TraceRecorder fed by real ``@llm_chat`` runs against the mock LLM server, and its sinks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import ProviderError, RunError
from simplellmfunc.hooks import ResponseYield, ToolCallStartEvent, is_event_yield
from simplellmfunc.runtime import (
    JSONLSink,
    SQLiteTraceSink,
    TraceRecord,
    TraceRecorder,
    read_jsonl,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
async def broken(city: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"no station in {city}")


@tool
async def slow(city: str) -> str:
    """A tool that takes far too long."""
    await anyio.sleep(60)
    return "late"


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


def make_agent(llm: OpenAICompatible) -> Any:
    @llm_chat(llm, toolkit=[weather, broken, slow], enable_event=True)
    async def agent(question: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions with the tools."""

    return agent


def script_tool_run(server: MockLLMServer) -> None:
    server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="c1"),
            ToolCallSpec("broken", {"city": "Rome"}, id="c2"),
            text="Let me check.",
            usage=(10, 5),
        ),
        Reply.text("Sunny in Oslo; no data for Rome.", usage=(20, 7)),
    )


async def test_records_stats_and_timeline_of_a_tool_run(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    script_tool_run(mock_server)
    agent = make_agent(llm)
    jsonl, db = tmp_path / "trace.jsonl", tmp_path / "trace.db"
    sqlite_sink = SQLiteTraceSink(db)
    recorder = TraceRecorder(sinks=[JSONLSink(jsonl), sqlite_sink], trace_id="t1")
    seen: list[Any] = []
    with anyio.fail_after(GUARD):
        async with recorder:
            async for item in recorder.wrap(agent("weather?", history=[])):
                seen.append(item)
            from_db = await sqlite_sink.read("t1")
            assert await sqlite_sink.trace_ids() == ["t1"]
    assert isinstance(seen[-1], ResponseYield)  # every item passes through

    records = recorder.records
    assert [r.kind for r in records] == ["llm", "tool", "tool", "llm", "end"]
    assert [r.step for r in records] == [0, 1, 2, 3, 4]
    first = records[0]
    assert (first.name, first.model, first.provider) == ("mock-model", "mock-model", "openai")
    assert (first.input_tokens, first.output_tokens, first.total_tokens) == (10, 5, 15)
    assert first.input == "[2 messages] user: weather?"
    assert first.output.startswith("Let me check. → weather(")
    assert first.duration_ms > 0
    tools = {r.name: r for r in records if r.kind == "tool"}
    assert tools["weather"].success
    assert tools["weather"].output == "sunny in Oslo"
    assert tools["weather"].input == '{"city": "Oslo"}'
    assert tools["weather"].tool_call_id == "c1"
    assert not tools["broken"].success
    assert tools["broken"].error is not None
    assert "no station in Rome" in tools["broken"].error
    assert tools["broken"].error.count("Error") == 1  # the type once, no "Error: " before it
    # The seed's ReAct view of each step (§9.1): thought, action, action_input, observation.
    assert (first.thought, first.action, first.action_input) == (
        "Let me check.",
        "weather",
        {"city": "Oslo"},
    )
    assert (first.observation, first.terminated) == (None, False)
    weather_step = tools["weather"]
    assert (weather_step.action, weather_step.action_input) == ("weather", {"city": "Oslo"})
    assert weather_step.observation == "sunny in Oslo"
    answer_step = records[3]
    assert (answer_step.thought, answer_step.action, answer_step.terminated) == (
        "Sunny in Oslo; no data for Rome.",
        None,
        True,
    )
    end = records[-1]
    assert end.terminated
    assert (end.terminated_by, end.name, end.success) == ("answer", "answer", True)
    assert end.output == "Sunny in Oslo; no data for Rome."
    assert end.total_tokens == 42
    assert recorder.last_input == "weather?"
    assert recorder.get_step(3).total_tokens == 27

    stats = recorder.stats()
    assert stats.total_steps == 5
    assert (stats.llm_calls, stats.tool_calls, stats.errors, stats.runs) == (2, 2, 1, 1)
    assert (stats.total_tokens, stats.prompt_tokens, stats.completion_tokens) == (42, 30, 12)
    assert stats.terminated_by == "answer"
    assert stats.total_time_ms == end.duration_ms

    timeline = recorder.to_timeline()
    lines = timeline.splitlines()
    assert lines[0].startswith("[0] llm   mock-model")
    assert lines[0].endswith("[15 tokens]")
    assert any(line.startswith("[4] end ") for line in lines)
    assert any("✗ " in line and "broken" in line for line in lines)
    assert "Result: Sunny in Oslo; no data for Rome." in lines
    assert lines[-1].startswith("(5 steps, ")
    assert lines[-1].endswith("42 tokens; 2 LLM calls, 2 tool calls, 1 error)")

    data = json.loads(recorder.to_json())
    assert data["trace_id"] == "t1"
    assert data["stats"]["total_tokens"] == 42
    assert [r["kind"] for r in data["records"]] == ["llm", "tool", "tool", "llm", "end"]

    assert await read_jsonl(jsonl) == list(records)
    assert from_db == list(records)


async def test_provider_failure_is_recorded(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.error(400, "bad request body"))
    recorder = TraceRecorder()
    with anyio.fail_after(GUARD), pytest.raises(ProviderError):
        async for _ in recorder.wrap(make_agent(llm)("hi", history=[])):
            pass
    failed, end = recorder.records
    assert (failed.kind, failed.success, failed.model) == ("llm", False, "mock-model")
    assert failed.error is not None
    assert "status 400" in failed.error
    assert (end.kind, end.terminated_by, end.success) == ("end", "error", False)
    stats = recorder.stats()
    assert (stats.errors, stats.terminated_by) == (1, "error")


async def test_abort_records_the_cancelled_tool(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("slow", {"city": "Oslo"}, id="s1")))
    signal = AbortSignal()
    recorder = TraceRecorder()
    with anyio.fail_after(GUARD):
        async for item in recorder.wrap(make_agent(llm)("hi", history=[], _abort_signal=signal)):
            if is_event_yield(item) and isinstance(item.event, ToolCallStartEvent):
                signal.abort("user pressed stop")
    kinds = [(r.kind, r.name, r.success) for r in recorder.records]
    assert kinds == [("llm", "mock-model", True), ("tool", "slow", False), ("end", "aborted", True)]
    cancelled = recorder.records[1]
    # The cancelled call's own end events make its record.
    assert cancelled.error == "Cancelled: user pressed stop"
    assert cancelled.tool_call_id == "s1"
    assert recorder.stats().terminated_by == "aborted"


async def test_concurrent_calls_keep_apart(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("one", ttft=0.05), Reply.text("two", ttft=0.05))
    agent = make_agent(llm)
    recorder = TraceRecorder()

    async def drive(question: str) -> None:
        async for _ in recorder.wrap(agent(question, history=[])):
            pass

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(drive, "first")
            group.start_soon(drive, "second")
    by_call: dict[str, list[str]] = {}
    for record in recorder.records:
        by_call.setdefault(record.agent_call_id, []).append(record.kind)
    assert sorted(by_call.values()) == [["llm", "end"], ["llm", "end"]]
    assert recorder.stats().runs == 2


async def test_other_items_are_ignored_and_load_round_trips() -> None:
    recorder = TraceRecorder()
    assert await recorder.record(("text", [])) == []
    assert recorder.records == ()
    record = TraceRecord(0, "tool", "weather", 1.0, 2.0, output="ok")
    recorder.load([record.to_dict()])
    old_id = recorder.trace_id
    recorder.load(recorder.to_dicts())
    assert recorder.records == (record,)
    assert recorder.trace_id != old_id
    with pytest.raises(IndexError):
        recorder.get_step(5)
    with pytest.raises(RunError, match="not a trace record"):
        recorder.load([{"step": "x"}])
    recorder.clear()
    assert recorder.stats().total_steps == 0
    empty = "(0 steps, 0.00s, 0 tokens; 0 LLM calls, 0 tool calls, 0 errors)"
    assert recorder.to_timeline().endswith(empty)


async def test_sinks_refuse_after_close_and_duplicates(tmp_path: Path) -> None:
    record = TraceRecord(0, "end", "answer", 1.0, 2.0)
    sink = JSONLSink(tmp_path / "t.jsonl")
    await sink.write(record, "a")
    await sink.aclose()
    with pytest.raises(RunError, match="closed"):
        await sink.write(record, "a")
    db_sink = SQLiteTraceSink(tmp_path / "t.db")
    try:
        await db_sink.write(record, "a")
        with pytest.raises(RunError):
            await db_sink.write(record, "a")  # the same (trace, step) again
        assert await db_sink.read() == [record]
    finally:
        await db_sink.aclose()
    assert await read_jsonl(tmp_path / "t.jsonl", trace_id="b") == []
