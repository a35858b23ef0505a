"""Waiting costs no queue slot: a queued durable run waiting for approval parks (gives its slot
back), a second run of the same queue of concurrency 1 completes meanwhile, and the answer puts
the first back on its queue, where it finishes from its recorded steps, in the same process
or, after a SIGKILL, in another worker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from durable.support import child, log_lines
from simplellmfunc import ApprovalDecision, OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import AnswerRefusedError, ConfigError, DurableError
from simplellmfunc.testing import (
    MockLLMServer,
    RecordedRequest,
    Reply,
    ToolCallSpec,
)

pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")

from dbos import DBOS

from simplellmfunc.runtime.durable import (
    DurableAgent,
    DurableClient,
    DurableConfig,
    DurableRuntime,
    QueueConfig,
)

GUARD = 90


def _label(request: RecordedRequest) -> str:
    return str(next(m["content"] for m in request.json["messages"] if m["role"] == "user"))


def _replies(request: RecordedRequest) -> Reply:
    """``wipe <file>`` asks to wipe it, then says done; anything else is answered at once."""
    label = _label(request)
    if not label.startswith("wipe "):
        return Reply.text(f"done {label}")
    if any(m["role"] == "tool" for m in request.json["messages"]):
        return Reply.text(f"done {label}")
    return Reply.tool_calls(ToolCallSpec("wipe", {"path": label.split()[1]}, id="call_w"))


WIPED: list[str] = []


@tool(requires_approval=True)
async def wipe(path: str) -> str:
    """Wipe a file (asks a person first)."""
    WIPED.append(path)
    return f"wiped {path}"


async def _status(client: DurableClient, workflow_id: str, wanted: str) -> None:
    while await client.status(workflow_id) != wanted:  # noqa: ASYNC110 - database state
        await anyio.sleep(0.05)


@asynccontextmanager
async def _clerk(
    tmp_path: Path, name: str
) -> AsyncIterator[tuple[MockLLMServer, DurableAgent, DurableClient]]:
    """A clerk agent that parks after 0.2 s, on a SQLite runtime with one queue ``q`` of
    concurrency 1, its model and a client of the same database."""
    WIPED.clear()
    config = DurableConfig(
        path=str(tmp_path / "durable.sqlite"),
        queues=(QueueConfig("q", concurrency=1, polling_interval=0.05),),
    )
    async with (
        MockLLMServer(default=_replies) as server,
        DurableRuntime(config, listen=("q",)),
        OpenAICompatible("sk-test", "mock", server.url) as llm,
        DurableClient(config) as client,
    ):

        @llm_chat(llm, toolkit=[wipe], approval_timeout=None)
        async def clerk(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You are a careful clerk."""

        yield server, DurableAgent(clerk, name=name, park_after=0.2), client


async def test_a_waiting_run_gives_its_queue_slot_to_the_next_and_resumes_on_the_answer(
    tmp_path: Path,
) -> None:
    async with _clerk(tmp_path, "test_durable_parking.clerk") as (server, agent, client):
        with anyio.fail_after(GUARD):
            first = await agent.enqueue("q", "wipe old.log", history=[], workflow_id="p1")
            await _status(client, "p1", "WAITING")  # parked: its slot is free
            assert [r.request_id for r in await first.waiting()] == ["call_w"]
            # The queue runs one session at a time: this one runs because p1 gave its slot back.
            second = await agent.enqueue("q", "count the files", history=[], workflow_id="p2")
            done = await second.result(timeout=60)
            assert done.text == "done count the files"
            assert await first.status() == "WAITING"
            assert WIPED == []
            with pytest.raises(TimeoutError):
                await first.result(timeout=0.3)  # still waiting, not "cancelled"
            await client.answer("p1", "call_w", ApprovalDecision.approve())
            result = await first.result(timeout=60)
            with pytest.raises(AnswerRefusedError):
                await client.answer("p1", "call_w", ApprovalDecision.approve())
            steps = await DBOS.list_workflow_steps_async("p1", load_output=False)
    assert result.text == "done wipe old.log"
    assert result.resumed is True  # executed again from its recorded steps
    assert WIPED == ["old.log"]  # once
    assert [s["function_name"] for s in steps].count("park") == 1
    assert [s["function_name"] for s in steps].count("llm:mock") == 2
    # p1's first LLM call was replayed after the park, not made again.
    assert [_label(r) for r in server.requests] == [
        "wipe old.log",
        "count the files",
        "wipe old.log",
    ]


async def test_an_aborted_parked_run_is_not_resumed_by_an_answer(tmp_path: Path) -> None:
    async with _clerk(tmp_path, "test_durable_parking.aborted") as (server, agent, client):
        with anyio.fail_after(GUARD):
            handle = await agent.enqueue("q", "wipe a.txt", history=[], workflow_id="p3")
            await _status(client, "p3", "WAITING")
            await handle.abort()
            assert await handle.status() == "CANCELLED"
            # The request is still recorded as unanswered; the answer reaches nobody.
            await client.answer("p3", "call_w", ApprovalDecision.approve())
            with pytest.raises(DurableError, match="cancelled"):
                await handle.result(timeout=10)
            assert await handle.status() == "CANCELLED"
    assert WIPED == []
    assert len(server.requests) == 1


def test_park_after_must_be_seconds() -> None:
    @llm_chat(OpenAICompatible("sk-test", "mock", "http://127.0.0.1:9"))
    async def chat(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """Chat."""

    with pytest.raises(ConfigError, match="park_after"):
        DurableAgent(chat, name="test_durable_parking.chat", park_after=-1)


async def test_a_parked_run_answered_after_its_worker_was_killed_resumes_in_another(
    postgres: str, tmp_path: Path
) -> None:
    """Postgres, two worker processes, a queue of concurrency 1."""
    config = DurableConfig(database_url=postgres)
    env = {"DURABLE_PARK_AFTER": "0.2", "DURABLE_CONCURRENCY": "1"}
    async with MockLLMServer(default=_replies) as server:
        with anyio.fail_after(GUARD):
            async with (
                child(
                    "worker",
                    postgres,
                    server.url,
                    tmp_path,
                    "parking",
                    env={**env, "DURABLE_EXECUTOR": "worker-a"},
                ) as (worker_a, lines_a),
                DurableClient(config) as client,
            ):
                await lines_a.until("ready")
                await client.enqueue("parking", "clerk", "wipe old.log", workflow_id="k1")
                await _status(client, "k1", "WAITING")
                await client.enqueue("parking", "clerk", "count files", workflow_id="k2")
                assert (await client.result("k2", timeout=60)).text == "done count files"
                assert await client.status("k1") == "WAITING"
                worker_a.kill()  # SIGKILL: nothing runs k1 now
                await worker_a.wait()
                await client.answer("k1", "call_w", ApprovalDecision.approve())
                assert await client.status("k1") == "ENQUEUED"  # back on its queue
                async with child(
                    "worker",
                    postgres,
                    server.url,
                    tmp_path,
                    "parking",
                    env={**env, "DURABLE_EXECUTOR": "worker-b"},
                ) as (worker_b, lines_b):
                    await lines_b.until("ready")
                    result = await client.result("k1", timeout=60)
    assert result.text == "done wipe old.log"
    assert result.resumed is True
    assert log_lines(tmp_path, "wipe") == [f"old.log {worker_b.pid}"]  # once, in worker B
    assert [_label(r) for r in server.requests] == ["wipe old.log", "count files", "wipe old.log"]
