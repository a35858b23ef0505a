"""Durable waits for a person: a durable run waiting for tool approval survives a SIGKILL and
goes on, in another process, when the answer comes; answers reach their calls in any order and
are replayed, not waited for again, when the run is executed again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from durable.support import child, log_lines
from simplellmfunc import ApprovalDecision, OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import AnswerRefusedError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")

from dbos import DBOS

from simplellmfunc.runtime.durable import (
    DurableAgent,
    DurableClient,
    DurableConfig,
    DurableHandle,
    DurableRuntime,
)

GUARD = 60


async def _waiting(client: DurableClient, workflow_id: str) -> list[str]:
    """The ids of the run's waiting requests, once there is one."""
    while True:
        waiting = await client.waiting(workflow_id)
        if waiting:
            return [request.request_id for request in waiting]
        await anyio.sleep(0.05)


async def test_a_run_killed_while_waiting_for_approval_resumes_elsewhere_after_the_answer(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("record", {"label": "a"}, id="call_r"),
            ToolCallSpec("wipe", {"path": "old.log"}, id="call_w"),
        ),
        Reply.text("wiped it"),
    )
    db = f"sqlite:///{tmp_path / 'durable.sqlite'}"
    config = DurableConfig(database_url=db)
    with anyio.fail_after(GUARD):
        async with child("start", db, mock_server.url, tmp_path) as (first, _lines):
            # The child's runtime is up (its database too) once its first LLM call came.
            while not mock_server.requests:  # noqa: ASYNC110 - another process's state
                await anyio.sleep(0.05)
            async with DurableClient(config) as client:
                assert await _waiting(client, "w1") == ["call_w"]
                first.kill()  # SIGKILL while the run waits for the answer
                await first.wait()
                waiting = await client.waiting("w1")
                assert [(r.tool_name, dict(r.arguments)) for r in waiting] == [
                    ("wipe", {"path": "old.log"})
                ]
                with pytest.raises(AnswerRefusedError, match="no approval request 'call_x'"):
                    await client.answer("w1", "call_x", ApprovalDecision.approve())
                # Answered from this process while no process runs the run.
                await client.answer("w1", "call_w", ApprovalDecision.approve())
        assert len(mock_server.requests) == 1
        async with child("resume", db, mock_server.url, tmp_path) as (second, lines):
            result = await lines.result()
            assert await second.wait() == 0
        async with DurableClient(config) as client:
            assert await client.waiting("w1") == []
    assert result["text"] == "wiped it"
    assert result["resumed"] is True
    assert result["pid"] == second.pid
    # No tool ran twice: record ran before the kill (replayed after it), wipe once, after it.
    assert [line.split()[0] for line in log_lines(tmp_path, "record")] == ["a"]
    wiped = log_lines(tmp_path, "wipe")
    assert wiped == [f"old.log {second.pid}"]
    assert len(mock_server.requests) == 2
    tool_results = [m for m in mock_server.requests[-1].json["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results] == ["recorded a", "wiped old.log"]


@tool(requires_approval=True)
async def remove(path: str) -> str:
    """Remove a file."""
    REMOVED.append(path)
    return f"removed {path}"


REMOVED: list[str] = []


async def test_answers_reach_their_calls_in_any_order_and_replay_without_a_wait(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    REMOVED.clear()
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("remove", {"path": "a.txt"}, id="call_1"),
            ToolCallSpec("remove", {"path": "b.txt"}, id="call_2"),
        ),
        Reply.text("done"),
        Reply.text("done again"),
    )
    async with (
        DurableRuntime(DurableConfig(path=str(tmp_path / "durable.sqlite"))) as runtime,
        OpenAICompatible("sk-test", "mock", mock_server.url) as llm,
    ):

        @llm_chat(llm, toolkit=[remove])
        async def tidy(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Tidy up."""

        agent = DurableAgent(tidy, name="test_durable_waits.tidy")
        with anyio.fail_after(GUARD):
            handle = await agent.start("tidy", history=[], workflow_id="tidy-1")
            while len(await handle.waiting()) < 2:  # noqa: ASYNC110 - state in the database
                await anyio.sleep(0.02)
            with pytest.raises(AnswerRefusedError, match="ApprovalDecision"):
                await handle.answer("call_1", "yes")  # type: ignore[arg-type]
            # The second call is answered first; each answer reaches its own call.
            await handle.answer("call_2", ApprovalDecision.deny("keep b"))
            await handle.answer("call_1", ApprovalDecision.edit({"path": "c.txt"}))
            first = await handle.result()
            with pytest.raises(AnswerRefusedError):
                await handle.answer("call_1", ApprovalDecision.approve())  # answered already
            assert REMOVED == ["c.txt"]
            steps = await DBOS.list_workflow_steps_async("tidy-1", load_output=False)
            last_llm = max(s["function_id"] for s in steps if s["function_name"] == "llm:mock")
            # Executed again from its last LLM call: the recorded answers come back at once.
            fork = await DBOS.fork_workflow_async("tidy-1", last_llm)
            again = await runtime.result(fork.workflow_id, timeout=30)
            assert await DurableHandle(fork.workflow_id).waiting() == []
    assert REMOVED == ["c.txt"]  # the approved call was replayed, not run again
    assert (first.text, again.text) == ("done", "done again")
    assert again.history is not None
    results = [m["content"] for m in again.history if m["role"] == "tool"]
    assert results[0].endswith("removed c.txt")
    assert "edited the arguments" in results[0]
    assert results[1] == "The user denied this call of remove: keep b"
    assert len(mock_server.requests) == 3
