"""A2A ``input-required``: a turn that waits for a person (a tool approval, a PyRepl
``input()``) sets its task ``input-required``; the SDK's own client answers with the next
message on that task, and the parked turn goes on to ``completed``. Real HTTP on loopback
(``a2a_app`` under uvicorn), a real sandboxed kernel, the mock LLM server."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text, new_text_message
from a2a.types import CancelTaskRequest, Role, SendMessageRequest, StreamResponse, TaskState
from google.protobuf.json_format import MessageToDict

from conftest import settle
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._messages import history_from_dicts
from simplellmfunc.serving import ServedAgent, a2a_app, running
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 60.0
KEY = "sk-test-123456789"
REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS") or REPO / ".cache" / "test-artifacts")
RAN: list[str] = []


@tool(requires_approval=lambda arguments: f"a payment of invoice {arguments.get('invoice')}")
async def pay(invoice: str) -> str:
    """Pay an invoice.

    Args:
        invoice: Its number.
    """
    RAN.append(invoice)
    return f"paid {invoice}"


def _message(text: str, context_id: str = "", task_id: str = "") -> SendMessageRequest:
    message = new_text_message(
        text, role=Role.ROLE_USER, context_id=context_id or None, task_id=task_id or None
    )
    return SendMessageRequest(message=message)


def _last_status(responses: list[StreamResponse]) -> Any:
    return [r.status_update for r in responses if r.HasField("status_update")][-1]


def _status_text(status_update: Any) -> str:
    return "".join(p.text for p in status_update.status.message.parts)


async def test_input_required_for_approval_and_input(mock_server: MockLLMServer) -> None:
    RAN.clear()
    ask = "name = input('Your name? ')\nprint('hello', name)"
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("pay", {"invoice": "A-1"}, id="c1")),
        Reply.text("Paid A-1."),
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": ask}, id="c2")),
        Reply.text("Greeted."),
        Reply.tool_calls(ToolCallSpec("pay", {"invoice": "B-2"}, id="c3")),
    )
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[pay], stream=True)
        async def payer(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You pay invoices and run code."""

        served = ServedAgent(payer, pyrepl=True)
        async with (
            running(lambda url: a2a_app(served, url)) as url,
            httpx.AsyncClient() as http,
        ):
            card = await A2ACardResolver(http, url).get_agent_card()
            client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
            with anyio.fail_after(GUARD):
                first = [r async for r in client.send_message(_message("pay A-1"))]
                asked = _last_status(first)
                task_id, context_id = asked.task_id, asked.context_id
                ran_before_answer = list(RAN)
                refused = [
                    r async for r in client.send_message(_message("maybe", context_id, task_id))
                ]
                done = [r async for r in client.send_message(_message("y", context_id, task_id))]
                second = [r async for r in client.send_message(_message("greet me", context_id))]
                typed = _last_status(second)
                greeted = [
                    r async for r in client.send_message(_message("Ada", context_id, typed.task_id))
                ]
                third = [r async for r in client.send_message(_message("pay B-2", context_id))]
                waiting_task = _last_status(third).task_id
                canceled = await client.cancel_task(CancelTaskRequest(id=waiting_task))
            await client.close()
            session_busy = served.sessions.get(context_id).busy
        history = await served.history(context_id)

    # The approval: input-required, saying what and how; the call did not run before the yes.
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "pay needs approval (a payment of invoice A-1)" in _status_text(asked)
    (waiting,) = MessageToDict(asked.metadata)["simplellmfunc"]["waiting"]
    assert (waiting["kind"], waiting["tool_call_id"]) == ("approval_request", "c1")
    assert waiting["arguments"] == {"invoice": "A-1"}
    assert ran_before_answer == []
    # A message that is no answer leaves the task input-required, saying how to answer.
    refused_status = _last_status(refused)
    assert refused_status.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "answer the approval with" in _status_text(refused_status)
    assert refused_status.task_id == task_id
    # The yes: the same task goes on and completes with the answer.
    finished = _last_status(done)
    assert (finished.task_id, finished.status.state) == (task_id, TaskState.TASK_STATE_COMPLETED)
    assert RAN == ["A-1"]
    chunks = [r.artifact_update for r in done if r.HasField("artifact_update")]
    assert get_artifact_text(chunks[-1].artifact) == "Paid A-1."
    # input(): the prompt in the status message; the next message is the value typed.
    assert typed.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert "asks for input: Your name?" in _status_text(typed)
    assert _last_status(greeted).status.state == TaskState.TASK_STATE_COMPLETED
    history_from_dicts(history)  # valid
    results = [m["content"] for m in history if m["role"] == "tool"]
    assert results[0] == "paid A-1"
    assert "hello Ada" in results[1]
    # Canceling an input-required task aborts the waiting turn: the call never ran.
    assert _last_status(third).status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert session_busy is False
    assert RAN == ["A-1"]
    assert "canceled by the A2A client" in results[-1]
    capture = {
        "input_required": MessageToDict(asked),
        "answer": "y",
        "completed": MessageToDict(finished),
    }
    _save("a2a-input-required.json", capture)


def _save(name: str, capture: dict[str, Any]) -> None:
    """Keep a capture for docs/human-in-the-loop.md (tiny: written in the event loop)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(capture, indent=2) + "\n", encoding="utf-8")


def _sdk_tasks() -> list[asyncio.Task[Any]]:
    """The a2a-sdk's background tasks alive now (producers, consumers, queue dispatchers)."""
    found = []
    for task in asyncio.all_tasks():
        code = getattr(task.get_coro(), "cr_code", None)
        if code is not None and f"{os.sep}a2a{os.sep}" in code.co_filename:
            found.append(task)
    return found


async def _rpc(http: httpx.AsyncClient, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return (await http.post("/a2a", json=body, headers=V1)).json()["result"]


V1 = {"A2A-Version": "1.0"}


@pytest.mark.parametrize("then", ["waits", "runs"])
async def test_a_streaming_client_that_disconnects_leaves_nothing_behind(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture, then: str
) -> None:
    """A streaming client disconnects after the first event; its task then waits for an
    approval (``input-required``) or still runs when the server shuts down. The SDK's
    background tasks of that task used to outlive the server (asyncio then destroyed them
    pending at loop shutdown, and the SDK's queues warned of lost events); the shutdown now
    drains them, with no warning from the SDK, OpenTelemetry or asyncio."""
    if then == "waits":
        mock_server.script(Reply.tool_calls(ToolCallSpec("pay", {"invoice": "C-3"}, id="c1")))
    else:
        mock_server.script(Reply.text("slow " * 200, chunks=200, chunk_delay=0.1))
    caplog.set_level(logging.WARNING)
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[pay], stream=True)
        async def payer(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You pay invoices."""

        served = ServedAgent(payer)
        message = {"role": "ROLE_USER", "parts": [{"text": "pay C-3"}], "messageId": "m1"}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
        async with running(lambda url: a2a_app(served, url)) as url:
            async with httpx.AsyncClient(base_url=url, timeout=GUARD) as http:
                with anyio.fail_after(GUARD):
                    stream = http.stream(
                        "POST", "/a2a", json={**body, "params": {"message": message}}, headers=V1
                    )
                    async with stream as response:
                        async for line in response.aiter_lines():
                            if line.startswith("data:"):
                                task_id = json.loads(line[5:])["result"]["task"]["id"]
                                break  # the client leaves mid-stream
                    wanted = (
                        "TASK_STATE_INPUT_REQUIRED" if then == "waits" else "TASK_STATE_WORKING"
                    )
                    state = ""
                    while state != wanted:  # (the server goes on without the client)
                        await anyio.sleep(0.05)
                        state = (await _rpc(http, "GetTask", {"id": task_id}))["status"]["state"]
            assert _sdk_tasks()  # the task's background tasks, alive while the server is
            closing = anyio.current_time()
        shutdown = anyio.current_time() - closing
        left = _sdk_tasks()  # the server has shut down
    assert left == []
    assert shutdown < 4.0  # the SDK's wind-down was seen to end (not waited out: 5 s)
    noise = [
        f"{r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.name.startswith(("a2a", "opentelemetry", "asyncio", "sse_starlette"))
        and "spec-compliant" not in r.getMessage()
    ]
    assert noise == []
    assert "C-3" not in RAN  # the approval was never given


@pytest.mark.parametrize("method", ["SendMessage", "SendStreamingMessage", "message/send"])
async def test_a_message_to_an_ended_task_is_refused_and_leaves_nothing_behind(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture, method: str
) -> None:
    """A message naming a task that has ended is refused (the SDK's "terminal state" error).
    The SDK used to refuse it only after it had made the task's queues anew, whose dispatcher
    tasks then stayed pending until the garbage collector destroyed them ("Task was destroyed
    but it is pending!", and OpenTelemetry's "Failed to detach context"): the noise of the
    official TCK around its tasks/list tests, which send such messages. The refusal now comes
    first, and nothing of the SDK stays alive."""
    mock_server.script(Reply.text("Done."))
    caplog.set_level(logging.WARNING)
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, stream=True)
        async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You answer briefly."""

        async with (
            running(lambda url: a2a_app(ServedAgent(helper), url)) as url,
            httpx.AsyncClient(base_url=url, timeout=GUARD) as http,
        ):
            message = {"role": "ROLE_USER", "parts": [{"text": "hi"}], "messageId": "m1"}
            task = (await _rpc(http, "SendMessage", {"message": message}))["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert await settle(lambda: not _sdk_tasks())  # the ended task wound down
            again = {**message, "messageId": "m2", "taskId": task["id"]}
            again["contextId"] = task["contextId"]
            headers = V1
            if method == "message/send":  # 0.3: no version header, its own message shape
                again.update(kind="message", role="user", parts=[{"kind": "text", "text": "hi"}])
                headers = {}
            body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"message": again}}
            reply = await http.post("/a2a", json=body, headers=headers)
            assert "is in terminal state: TASK_STATE_COMPLETED" in reply.text
            assert await settle(lambda: not _sdk_tasks()), _sdk_tasks()
            gc.collect()  # (what the collector would destroy later on)
            await anyio.sleep(0.05)
    noise = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert noise == []
