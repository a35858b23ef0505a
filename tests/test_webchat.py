"""The web chat app over real HTTP (uvicorn on loopback): the page and its files, the token,
the limits and error answers, a failing turn, the history a reload redraws, and
``simplellmfunc web CONFIG`` as a subprocess (the browser tests are in test_webchat_browser)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

from acceptance_support import clean_env, finish, start_cli, write
from conftest import settle
from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc.serving import ServeLimits, SessionStore, is_loopback, web_chat_app
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve)
        assert await settle(lambda: server.started, 20.0)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
                yield http
        finally:
            server.should_exit = True


async def frames(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            yield json.loads(line[6:])


def test_is_loopback() -> None:
    assert all(map(is_loopback, ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.5", "::", "example.com"]))


async def test_page_token_limits_and_history(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("slow *reply*", chunks=20, chunk_delay=0.1)
    llm = OpenAICompatible("sk-test-123456789", "mock", mock_server.url)

    @llm_chat(llm, stream=True, enable_event=True)
    async def agent(message: str, history: list | None = None):
        """Be brief."""

    app = web_chat_app(
        agent,
        pyrepl=False,
        limits=ServeLimits(max_sessions=1),
        token="s3cret",
        title="<T>",
        max_message_chars=50,
    )
    auth = {"authorization": "Bearer s3cret"}
    async with llm, serve(app) as http:
        # The page needs the token in its address; its files need none (no secret in them).
        assert (await http.get("/")).status_code == 401
        assert (await http.get("/?token=wrong")).status_code == 401
        page = await http.get("/?token=s3cret")
        assert page.status_code == 200
        assert "<title>&lt;T&gt;</title>" in page.text
        assert "renderMarkdown" in (await http.get("/static/markdown.js")).text
        assert (await http.get("/static/app.css")).status_code == 200

        # The API takes it as a bearer header only (a token in a URL ends up in logs).
        assert (await http.get("/api/history/a")).status_code == 401
        assert (await http.get("/api/history/a?token=s3cret")).status_code == 401
        wrong = await http.get("/api/history/a", headers={"authorization": "Bearer wrong"})
        assert wrong.status_code == 401
        assert wrong.json()["error"] == "a valid bearer token is required"
        # Reading a session never used opens nothing: it is not found.
        assert (await http.get("/api/history/a", headers=auth)).status_code == 404
        bad = await http.post("/api/chat/bad%20id", json={"message": "hi"}, headers=auth)
        assert bad.status_code == 400
        assert "invalid session id" in bad.json()["error"]
        empty = await http.post("/api/chat/a", json={"message": " "}, headers=auth)
        assert empty.status_code == 400
        long = await http.post("/api/chat/a", json={"message": "x" * 51}, headers=auth)
        assert long.status_code == 413

        async with http.stream("POST", "/api/chat/a", json={"message": "hi"}, headers=auth) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            seen = []
            async for event in frames(r):
                seen.append(event)
                if event["kind"] == "llm_chunk_arrive" and len(seen) < 10:
                    # Busy: the same tab again, and a second tab beyond max_sessions=1.
                    again = await http.post("/api/chat/a", json={"message": "hi"}, headers=auth)
                    assert again.status_code == 409
                    other = await http.post("/api/chat/b", json={"message": "hi"}, headers=auth)
                    assert other.status_code == 503
                    assert "sessions are open" in other.json()["error"]
                    stop = await http.post("/api/abort/a", headers=auth)
                    assert stop.json() == {"aborted": True}
        end = next(e for e in seen if e["kind"] == "react_end")
        assert end["aborted"]
        assert end["abort_reason"] == "stopped by the user"
        assert seen[-1]["type"] == "response"

        history = (await http.get("/api/history/a", headers=auth)).json()
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
        assert history["messages"][0]["text"] == "hi"
        assert (await http.post("/api/abort/zzz", headers=auth)).json() == {"aborted": False}
        no_kernel = await http.post(
            "/api/input/a", json={"request_id": "r", "value": "v"}, headers=auth
        )
        assert no_kernel.status_code == 409
        assert "no PyRepl kernel" in no_kernel.json()["error"]
        overview = (await http.get("/api/sessions", headers=auth)).json()
        assert overview["max_sessions"] == 1
        assert [s["id"] for s in overview["sessions"]] == ["a"]


async def test_a_failing_turn_ends_with_an_error_frame() -> None:
    async def broken(message: str, history: list | None = None, **_: Any) -> AsyncIterator[str]:
        yield "partial"
        raise RuntimeError("the agent broke")

    async with (
        SessionStore(broken) as store,
        serve(web_chat_app(broken, sessions=store)) as http,
        http.stream("POST", "/api/chat/t1", json={"message": "go"}) as response,
    ):
        seen = [e async for e in frames(response)]
    assert seen == [
        {"type": "item", "value": "partial"},
        {"type": "error", "error": "RuntimeError", "message": "the agent broke"},
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _code(request: RecordedRequest) -> Reply:
    if request.json["messages"][-1]["role"] == "tool":
        return Reply.text("printed")
    return Reply.tool_calls(ToolCallSpec("execute_code", {"code": "print('from', 6 * 7)"}))


async def test_web_command_serves_a_config_with_a_kernel_per_tab(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    mock_server.default = _code
    config = write(
        tmp_path / "agent.yml",
        "name: helper\nmodel: openai:mock-model\ntoolkit:\n  pyrepl: {timeout: 30}\n",
    )
    env = clean_env(
        {
            "OPENAI_API_KEY": "sk-test-123456789",
            "OPENAI_BASE_URL": mock_server.url,
            "SIMPLELLMFUNC_SERVE_TOKEN": "tok",  # the token: from the environment, not argv
        }
    )
    port = _free_port()
    args = ["web", config, "--port", str(port), "--idle-timeout", "60"]
    process = await start_cli(*args, env=env, cwd=tmp_path)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:

            async def up() -> bool:
                with contextlib.suppress(httpx.TransportError):
                    return (await http.get("/?token=tok")).status_code == 200
                return False

            for _ in range(300):  # the server starts (30 s at most)
                if await up():
                    break
                await anyio.sleep(0.1)
            assert "<title>helper</title>" in (await http.get("/?token=tok")).text
            assert (await http.get("/api/sessions")).status_code == 401
            auth = {"authorization": "Bearer tok"}
            outputs = []
            for tab in ("one", "two"):
                body = {"message": "run"}
                async with http.stream("POST", f"/api/chat/{tab}", json=body, headers=auth) as r:
                    seen = [e async for e in frames(r)]
                outputs += [e["data"]["text"] for e in seen if e.get("data", {}).get("text")]
            assert outputs == ["from 42\n", "from 42\n"]
            sessions = (await http.get("/api/sessions", headers=auth)).json()["sessions"]
            assert sorted(s["id"] for s in sessions) == ["one", "two"]
            assert all(s["kernel"] for s in sessions)  # a kernel each
    finally:
        process.send_signal(signal.SIGINT)
        done = await finish(process)
    assert done.code == 0, done.stderr
    # The address names the token's variable; the token itself is never printed.
    assert f"helper: open http://127.0.0.1:{port}/?token=$SIMPLELLMFUNC_SERVE_TOKEN" in done.stderr
    assert "tok\n" not in done.stderr
