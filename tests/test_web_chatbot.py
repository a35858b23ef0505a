"""examples/web_chatbot.py over real HTTP (uvicorn on loopback) with two concurrent users.

The model is MockLLMServer answering by conversation: the user's word picks the code the model
runs in the session's kernel, and a tool result is answered with a short summary of it.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import uvicorn

from conftest import settle
from simplellmfunc import OpenAICompatible
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from web_chatbot import make_app

CODE = {
    "count": "import time\nfor i in range(3):\n    print('line', i, flush=True)\n"
    "    time.sleep(0.3)",
    "name": "name = input('Name? ')\nprint('hi', name)",
    "loop": "x = 41\nimport time\nfor i in range(200):\n    print('tick', i, flush=True)\n"
    "    time.sleep(0.1)",
    "x?": "print(x + 1)",
}


def brain(request: RecordedRequest) -> Reply:
    """The model: run the code the user's word names; then summarise the tool result."""
    last = request.json["messages"][-1]
    if last["role"] == "tool":
        return Reply.text(f"done: {last['content'][:300]}")
    return Reply.tool_calls(ToolCallSpec("execute_code", {"code": CODE[last["content"]]}))


class Client:
    """One user of the app: its turns as parsed SSE events."""

    def __init__(self, http: httpx.AsyncClient, sid: str) -> None:
        self.http, self.sid = http, sid

    async def turn(self, message: str) -> AsyncIterator[tuple[float, dict[str, Any]]]:
        async with self.http.stream("POST", f"/chat/{self.sid}", json={"message": message}) as r:
            assert r.status_code == 200
            assert r.headers["content-type"].startswith("text/event-stream")
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    yield time.monotonic(), json.loads(line[6:])

    async def post(self, what: str, **body: Any) -> httpx.Response:
        return await self.http.post(f"/{what}/{self.sid}", json=body)


def stdout(events: list[dict[str, Any]]) -> str:
    return "".join(
        e["data"]["text"]
        for e in events
        if e["kind"] == "custom" and e["event_name"] == "kernel_stdout"
    )


async def alice_counts_then_aborts(alice: Client, mock: MockLLMServer) -> None:
    times = [
        t
        for t, e in [x async for x in alice.turn("count")]
        if e.get("event_name") == "kernel_stdout"
    ]
    assert len(times) == 3
    assert times[-1] - times[0] >= 0.45  # printed 0.3 s apart, arrived as printed (live)

    seen: list[dict[str, Any]] = []
    async for _, event in alice.turn("loop"):
        seen.append(event)
        if event.get("event_name") == "kernel_stdout" and "tick 2" in stdout(seen):
            assert (await alice.post("abort")).json() == {"aborted": True}
    kinds = [e["kind"] for e in seen]
    end = next(e for e in seen if e["kind"] == "tool_call_end")
    assert "Execution failed" in end["result"]
    assert "aborted" in end["result"]
    assert "tick 2" in end["result"]
    assert kinds.index("tool_call_start") < kinds.index("tool_call_end")
    react_end = next(e for e in seen if e["kind"] == "react_end")
    assert react_end["aborted"]
    assert react_end["abort_reason"] == "stopped by the user"
    assert seen[-1]["type"] == "response"
    assert seen[-1]["messages_count"] >= 4
    assert all(e["origin"]["session_id"] == "alice" for e in seen if e["type"] == "event")

    after = [e async for _, e in alice.turn("x?")]
    assert stdout(after) == "42\n"  # the aborted cell's variables are still in the kernel
    # The model saw the aborted cell's output: it is in the history the next turn sent.
    sent = [m for r in mock.requests for m in r.json["messages"] if m["role"] == "tool"]
    assert any("tick 2" in m["content"] and "abort" in m["content"].lower() for m in sent)


async def bob_answers_input(bob: Client) -> None:
    events: list[dict[str, Any]] = []
    async for _, event in bob.turn("name"):
        events.append(event)
        if event.get("event_name") == "kernel_input_request":
            request_id = event["data"]["request_id"]
            assert event["data"]["prompt"] == "Name? "
            assert (await bob.post("input", request_id=request_id, value="Ada")).json() == {
                "ok": True
            }
            again = await bob.post("input", request_id=request_id, value="Eve")
            assert again.status_code == 409
            assert "already answered" in again.json()["error"]
    assert "hi Ada" in stdout(events)
    isolated = [e async for _, e in bob.turn("x?")]
    end = next(e for e in isolated if e["kind"] == "tool_call_end")
    assert "NameError" in end["result"]  # alice's x is not in bob's kernel


@contextlib.asynccontextmanager
async def serve(mock: MockLLMServer) -> AsyncIterator[httpx.AsyncClient]:
    """The example app on a real uvicorn server on loopback, with the mock as its model."""
    mock.default = brain
    llm = OpenAICompatible("sk-test-123456789", "mock", mock.url)
    app = make_app(llm, idle_timeout=1.5)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        assert await settle(lambda: server.started, 20.0)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            async with (
                llm,
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http,
            ):
                yield http
        finally:
            server.should_exit = True


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def kernels() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=False)}


async def test_two_users_over_http(mock_server: MockLLMServer) -> None:
    before = children()
    async with serve(mock_server) as http:
        alice, bob = Client(http, "alice"), Client(http, "bob")
        async with anyio.create_task_group() as users:
            users.start_soon(alice_counts_then_aborts, alice, mock_server)
            users.start_soon(bob_answers_input, bob)
        overview = (await http.get("/sessions")).json()
        assert {s["id"]: s["turns"] for s in overview} == {"alice": 3, "bob": 2}
        assert all(s["kernel"] and not s["busy"] for s in overview)
        assert (await alice.post("abort")).json() == {"aborted": False}  # no turn running

        deadline = time.monotonic() + 10
        while (await http.get("/sessions")).json():  # reclaimed after 1.5 s without a turn
            assert time.monotonic() < deadline
            await anyio.sleep(0.2)
        # The sessions' kernels are gone; only the warm pool's two idle kernels are left (a
        # sandboxed kernel is several processes: count the kernels, our direct children).
        assert await settle(lambda: len(kernels() - before) <= 2, 10.0)
        gone = await bob.post("input", request_id="nope", value="x")
        assert gone.status_code == 409
        assert "no open session" in gone.json()["error"]
    assert await settle(lambda: not children() - before, 10.0)  # no process left
