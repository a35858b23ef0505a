"""OpenTelemetry GenAI spans: one tree per run in process, and one trace across processes when
a worker runs a session enqueued under the caller's span."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from durable.support import child, session_reply
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

pytest.importorskip("opentelemetry.sdk", reason="the spans tests need opentelemetry-sdk (dev)")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from simplellmfunc.runtime.otel import GenAITracing

GUARD = 60


@pytest.fixture
def spans() -> tuple[GenAITracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return GenAITracing(provider), exporter


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def broken() -> str:
    """Fail."""
    raise ValueError("no luck")


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    named: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        named.setdefault(span.name, []).append(span)
    return named


async def test_a_run_is_one_tree_of_genai_spans(
    mock_server: MockLLMServer, spans: tuple[GenAITracing, InMemorySpanExporter]
) -> None:
    tracing, exporter = spans
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}), ToolCallSpec("broken", {})),
        Reply.text("5"),
    )
    async with OpenAICompatible("sk-test", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[add, broken])
        async def calc(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Calculate."""

        with anyio.fail_after(GUARD), tracing.agent_run("calc", conversation_id="c-1"):
            async for _ in calc("2 + 3?", history=[]):
                pass
    named = _by_name(exporter.get_finished_spans())
    assert sorted(named) == [
        "chat mock",
        "execute_tool add",
        "execute_tool broken",
        "invoke_agent calc",
    ]
    (run,) = named["invoke_agent calc"]
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == "c-1"
    children = [*named["chat mock"], *named["execute_tool add"], *named["execute_tool broken"]]
    assert len(named["chat mock"]) == 2
    for span in children:
        assert span.parent is not None
        assert span.parent.span_id == run.context.span_id
        assert span.context.trace_id == run.context.trace_id
    first = named["chat mock"][0].attributes
    assert first is not None
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "mock"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert first["gen_ai.usage.input_tokens"] > 0
    assert "gen_ai.usage.output_tokens" in first
    (failed,) = named["execute_tool broken"]
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "ValueError"
    assert not failed.status.is_ok


async def test_a_session_run_by_a_worker_joins_the_callers_trace(
    spans: tuple[GenAITracing, InMemorySpanExporter], tmp_path: Path
) -> None:
    pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")
    from simplellmfunc.runtime.durable import DurableClient, DurableConfig

    tracing, exporter = spans
    database = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    spans_file = tmp_path / "worker-spans.jsonl"
    async with MockLLMServer(default=session_reply("record")) as server:
        env = {"SPANS_FILE": str(spans_file), "DURABLE_EXECUTOR": "worker-1"}
        with anyio.fail_after(GUARD):
            async with child("worker", database, server.url, tmp_path, env=env) as (_, lines):
                await lines.until("ready")
                config = DurableConfig(database_url=database)
                async with DurableClient(config, tracing=tracing) as client:
                    with tracing.tracer.start_as_current_span("user request") as request:
                        session = await client.enqueue("sessions", "clerk", "s1", history=[])
                    result = await client.result(session)
    assert result.text == "done s1"
    records = [json.loads(line) for line in spans_file.read_text().splitlines()]
    named = {r["name"]: r for r in records}
    assert sorted(named) == ["chat mock", "execute_tool record", "invoke_agent clerk"]
    root = request.get_span_context()
    run = named["invoke_agent clerk"]
    # The worker's run span is a child of the caller's span: one trace across the processes.
    assert (run["trace_id"], run["parent_id"]) == (root.trace_id, root.span_id)
    assert run["attributes"]["gen_ai.conversation.id"] == session
    for record in records:
        assert record["trace_id"] == root.trace_id
        if record is not run:
            assert record["parent_id"] == run["span_id"]
    assert [s.name for s in exporter.get_finished_spans()] == ["user request"]
