"""Durable runs on DBOS: steps recorded, a SIGKILLed run resumed without repeating a call."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acceptance_support import clean_env, start_cli, write
from durable.support import Lines, child, log_lines
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.events import CustomEvent, EventYield
from simplellmfunc.exceptions import DurableError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")

from dbos import DBOS

from simplellmfunc.engine import STEP_REPLAYED
from simplellmfunc.runtime.durable import (
    RESUME_NOTE,
    DurableAgent,
    DurableClient,
    DurableConfig,
    DurableRuntime,
)

GUARD = 60


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'durable.sqlite'}"


async def test_sigkill_mid_run_resumes_from_the_last_recorded_step(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("record", {"label": "a"})),
        Reply.tool_calls(
            ToolCallSpec("hang", {"label": "b"}), ToolCallSpec("charge", {"amount": 5})
        ),
        Reply.text("done"),
    )
    db = _sqlite(tmp_path)

    with anyio.fail_after(GUARD):
        async with child("start", db, mock_server.url, tmp_path) as (process, lines):
            await lines.until("blocked")
            await lines.until("blocked")  # hang and charge both started, neither finished
            process.kill()
            await process.wait()
        assert len(mock_server.requests) == 2
        async with child("resume", db, mock_server.url, tmp_path) as (process, lines):
            result = await lines.result()
            assert await process.wait() == 0
    assert result["text"] == "done"
    assert result["resumed"] is True
    # The two LLM calls and the record call were recorded: replayed, not made again.
    assert len(mock_server.requests) == 3
    assert result["replayed"] == 3
    assert len(log_lines(tmp_path, "record")) == 1
    # The idempotent call cut by the kill ran again (at least once) ...
    assert len(log_lines(tmp_path, "hang")) == 2
    # ... the non-idempotent one did not: the model was told it was interrupted.
    assert len(log_lines(tmp_path, "charge")) == 1
    last = json.dumps(mock_server.requests[-1].json)
    assert "was interrupted by a restart" in last
    assert "Python (PyRepl) kernel is new" in last


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[DurableRuntime]:
    async with DurableRuntime(DurableConfig(path=str(tmp_path / "durable.sqlite"))) as launched:
        yield launched


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_replayed_steps_are_marked_and_the_model_told_of_the_resume(
    mock_server: MockLLMServer, runtime: DurableRuntime
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 17, "b": 25})),
        Reply.text("42"),
        Reply.text("42, again"),
    )
    events: list[EventYield] = []
    async with OpenAICompatible("sk-test", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[add], enable_event=True)
        async def calc(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Calculate."""

        agent = DurableAgent(calc, name="test_durable.calc_replay", on_event=events.append)
        with anyio.fail_after(GUARD):
            first = await agent.run("17 + 25?", history=[], workflow_id="calc-1")
            assert (first.text, first.executed_steps, first.replayed_steps) == ("42", 3, 0)
            assert first.history is not None
            assert first.history[-1]["content"] == "42"
            assert not _replayed(events)
            events.clear()
            # Re-execute the run from its last LLM call (step 3): steps 1 and 2 are replayed.
            fork = await DBOS.fork_workflow_async("calc-1", 3)
            again = await runtime.result(fork.workflow_id)
    assert (again.text, again.resumed, again.replayed_steps, again.executed_steps) == (
        "42, again",
        True,
        2,
        1,
    )
    assert _replayed(events) == [{"kind": "llm", "name": "mock"}, {"kind": "tool", "name": "add"}]
    assert len(mock_server.requests) == 3  # the replayed LLM call was not made again
    assert RESUME_NOTE in json.dumps(mock_server.requests[-1].json)
    assert RESUME_NOTE not in json.dumps(mock_server.requests[1].json)


def _replayed(events: list[EventYield]) -> list[Any]:
    return [
        e.event.data
        for e in events
        if isinstance(e.event, CustomEvent) and e.event.event_name == STEP_REPLAYED
    ]


async def test_abort_stops_a_durable_run_and_cancels_it_durably(
    mock_server: MockLLMServer, runtime: DurableRuntime
) -> None:
    started = anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    mock_server.script(Reply.tool_calls(ToolCallSpec("wait_forever", {})))
    async with OpenAICompatible("sk-test", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[wait_forever])
        async def waiter(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Wait."""

        agent = DurableAgent(waiter, name="test_durable.waiter")
        with anyio.fail_after(GUARD):
            handle = await agent.start("wait", history=[])
            await started.wait()
            await handle.abort()
            with pytest.raises(DurableError):
                await handle.result()
            assert await handle.status() == "CANCELLED"
    assert len(mock_server.requests) == 1


async def test_a_run_cancelled_elsewhere_records_no_further_step(
    mock_server: MockLLMServer, runtime: DurableRuntime
) -> None:
    # The cancel comes through the database only (as from another process): the tool call
    # running then finishes, but its record is refused (the run no longer owns the workflow)
    # and the run stops there: no further LLM call.
    started, release = anyio.Event(), anyio.Event()

    @tool
    async def slow() -> str:
        """Work slowly."""
        started.set()
        await release.wait()
        return "finished"

    mock_server.script(Reply.tool_calls(ToolCallSpec("slow", {})), Reply.text("never asked"))
    async with OpenAICompatible("sk-test", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[slow])
        async def worker(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Work."""

        agent = DurableAgent(worker, name="test_durable.cancelled_elsewhere")
        with anyio.fail_after(GUARD):
            handle = await agent.start("work", history=[])
            await started.wait()
            await DBOS.cancel_workflow_async(handle.workflow_id)
            release.set()
            with pytest.raises(DurableError):
                await handle.result()
            assert await handle.status() == "CANCELLED"
            steps = await DBOS.list_workflow_steps_async(handle.workflow_id)
    assert [step["function_name"] for step in steps] == ["llm:mock"]
    assert len(mock_server.requests) == 1


def test_the_durable_layer_uses_only_dbos_public_api() -> None:
    # The dbos pin is a major version (pyproject.toml): nothing here may reach into DBOS's
    # private modules or attributes, which change between minor releases.
    import ast

    import dbos

    import simplellmfunc.runtime.durable as durable

    folder = Path(durable.__file__).parent
    private: list[str] = []
    for source in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dbos"):
                if node.module != "dbos":
                    private.append(f"{source.name}: from {node.module} import ...")
                names = [a.name for a in node.names]
                private += [f"{source.name}: dbos.{n}" for n in names if n not in dbos.__all__]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
                private += [f"{source.name}: import {n}" for n in names if n.startswith("dbos.")]
            elif (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name)
                and node.value.id in {"DBOS", "dbos"}
            ):
                private.append(f"{source.name}: {node.value.id}.{node.attr}")
    assert private == []
    assert "sqlite3" not in (folder / "_journal.py").read_text()


async def test_cli_worker_runs_queued_sessions_of_a_config_agent(tmp_path: Path) -> None:
    database = tmp_path / "durable.sqlite"
    config = write(
        tmp_path / "clerk.yml",
        "name: clerk\nkind: simple\nmodel: openai:mock-model\nsystem: Be brief.\n"
        f"durable:\n  path: {database}\n"
        "  queues:\n    sessions: {worker_concurrency: 2, polling_interval: 0.05}\n",
    )
    async with MockLLMServer(default=Reply.text("Hi there!")) as server:
        env = clean_env({"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": server.url})
        with anyio.fail_after(GUARD):
            worker = await start_cli("worker", config, "--queue", "sessions", env=env, cwd=tmp_path)
            try:
                assert worker.stderr is not None
                await Lines(worker.stderr).until("worker ready")
                async with DurableClient(DurableConfig(path=str(database))) as client:
                    ids = [await client.enqueue("sessions", "clerk", f"hi {n}") for n in range(3)]
                    results = [await client.result(i) for i in ids]
                worker.send_signal(signal.SIGTERM)
                assert await worker.wait() == 0
            finally:
                if worker.returncode is None:
                    worker.kill()
                with anyio.CancelScope(shield=True):
                    await worker.wait()
                    await worker.aclose()
    assert [r.text for r in results] == ["Hi there!"] * 3
    assert all(r.history is not None and r.history[-1]["content"] == "Hi there!" for r in results)
    assert len(server.requests) == 3
