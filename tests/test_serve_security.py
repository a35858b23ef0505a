"""The edge of every served app, attacked as a web page or a hostile client would: cross-site
posts, DNS rebinding (a foreign ``Host``), huge, slow, deep and invalid-Unicode bodies, idle
sockets, another principal's sessions and tasks, malformed A2A JSON-RPC, a token on argv.

Socket-level threats (idle sockets, a 50 MB upload) run against real uvicorn on loopback;
the others go through httpx's ASGI transport to the same app."""

from __future__ import annotations

import json
import logging
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
import pytest

from acceptance_support import clean_env, eventually, finish, start_cli, write
from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._cli import main
from simplellmfunc.exceptions import ConfigError, RequestRefusedError, UserError
from simplellmfunc.runtime.config import load_agent_config
from simplellmfunc.serving import (
    EdgePolicy,
    Principal,
    Principals,
    ServedAgent,
    ServeLimits,
    ServeSettings,
    allowed_hosts_for,
    create_app,
    parse_json_body,
    running,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 20.0
KEY = "sk-test-123456789"
ALICE = "alice-token-0123456789"
BOB = "bob-token-9876543210ab"
ORIGIN = "http://127.0.0.1:8000"
DEEP = b"[" * 50_000 + b"]" * 50_000


@tool
async def lookup(key: str) -> str:
    """Look a key up in the server's own records."""
    return f"internal record of {key}"


def chat_agent(llm: Any) -> Any:
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You are a helper."""

    return llm_chat(llm, stream=True, toolkit=[lookup])(helper)


@asynccontextmanager
async def asgi(
    mock: MockLLMServer, limits: ServeLimits | None = None, **options: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, ServedAgent]]:
    """``serve --web``'s app (A2A too) through httpx's ASGI transport, Host 127.0.0.1:8000."""
    async with OpenAICompatible(KEY, "mock-model", mock.url) as llm:
        served = ServedAgent(chat_agent(llm), limits=limits)
        app = create_app(served, ORIGIN, web=True, **{"token": None, **options})
        transport = httpx.ASGITransport(app=app)
        async with (
            served,
            httpx.AsyncClient(transport=transport, base_url=ORIGIN, timeout=GUARD) as http,
        ):
            yield http, served


def chat_body(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_cross_site_posts_and_a_foreign_host_never_reach_the_agent(
    mock_server: MockLLMServer,
) -> None:
    """With no token (``web`` on loopback, ``serve --no-auth``), a page the user visits can
    neither post a turn nor, through DNS rebinding, read the sessions."""
    mock_server.default = Reply.text("hello")
    async with asgi(mock_server) as (http, _):
        # A form or text/plain post is a "simple" request: no preflight, sent cross-site.
        plain = await http.post(
            "/api/chat/s1",
            content=b'{"message": "run rm -rf"}',
            headers={"content-type": "text/plain", "origin": "http://evil.example"},
        )
        plain_no_origin = await http.post(
            "/api/chat/s1", content=b'{"message": "hi"}', headers={"content-type": "text/plain"}
        )
        form = await http.post("/v1/chat/completions", data={"messages": "hi"})
        fetch_site = await http.post(
            "/api/chat/s1", json={"message": "hi"}, headers={"sec-fetch-site": "cross-site"}
        )
        a2a = await http.post("/a2a", json={}, headers={"origin": "http://evil.example"})
        # DNS rebinding: evil.example resolves to 127.0.0.1, the browser sends its own name.
        rebound = [
            await http.get(path, headers={"host": "evil.example:8000"})
            for path in ("/api/sessions", "/api/history/s1", "/v1/models", "/health")
        ]
        own = await http.post(
            "/v1/chat/completions", json=chat_body("hi"), headers={"origin": ORIGIN}
        )
        other_port = await http.post(
            "/api/chat/s2", json={"message": "hi"}, headers={"origin": "http://127.0.0.1:3000"}
        )
    assert (plain.status_code, fetch_site.status_code, a2a.status_code) == (403, 403, 403)
    assert other_port.status_code == 403  # another local origin is another site's page
    assert plain.json() == {
        "ok": False,
        "error": "cross-origin requests from 'http://evil.example' are refused",
    }
    assert (plain_no_origin.status_code, form.status_code) == (415, 415)
    assert form.json()["error"]["type"] == "invalid_request_error"
    assert [r.status_code for r in rebound] == [421, 421, 421, 421]
    assert "evil.example" in rebound[0].json()["error"]
    assert own.status_code == 200  # the page's own origin, JSON: the one way in
    assert len(mock_server.requests) == 1


async def test_deep_json_invalid_bodies_and_lone_surrogates(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    """50,000-deep JSON, broken JSON and a non-UTF-8 body get a 400 with a JSON error (and no
    traceback in the log); a lone surrogate is replaced with U+FFFD, so the session's history
    stays readable after the turn."""
    mock_server.default = Reply.text("noted")
    caplog.set_level(logging.INFO)
    async with asgi(mock_server) as (http, served):
        json_type = {"content-type": "application/json"}
        deep = [
            await http.post(path, content=DEEP, headers=json_type)
            for path in ("/v1/chat/completions", "/api/chat/s1")
        ]
        broken = await http.post(
            "/v1/chat/completions", content=b'{"messages": [', headers=json_type
        )
        latin = await http.post(
            "/api/chat/s1", content=b'{"message": "caf\xe9"}', headers=json_type
        )
        surrogate = b'{"message": "half an emoji: \\ud83d!"}'
        async with http.stream("POST", "/api/chat/s1", content=surrogate, headers=json_type) as r:
            frames = [line async for line in r.aiter_lines() if line.startswith("data: ")]
        history = await http.get("/api/history/s1")
        v1 = await http.post(
            "/v1/chat/completions",
            content=b'{"messages": [{"role": "user", "content": "\\udc00 alone"}]}',
            headers=json_type,
        )
        stored = await served.history("s1")
    assert [r.status_code for r in deep] == [400, 400]
    assert "nests deeper than 64" in deep[0].json()["error"]["message"]
    assert "nests deeper than 64" in deep[1].json()["error"]
    assert broken.status_code == 400
    assert "not valid JSON" in broken.json()["error"]["message"]
    assert latin.status_code == 400
    assert json.loads(frames[-1][6:])["type"] == "response"  # the stream ran to its end
    assert history.status_code == 200
    assert history.json()["messages"][0]["text"] == "half an emoji: \ufffd!"
    assert stored[1]["content"] == "half an emoji: \ufffd!"
    assert v1.status_code == 200
    assert mock_server.requests[-1].json["messages"][-1]["content"] == "\ufffd alone"
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_malformed_a2a_json_rpc_gets_json_rpc_errors_without_tracebacks(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="a2a")
    bodies = [
        b"not json",
        DEEP,
        b"{}",
        b"[]",
        b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": 5}',
        b'{"jsonrpc": "2.0", "id": 2, "method": "SendMessage", "params": {"message": 5}}',
        b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask", "params": {"id": "x"}}',
    ]
    async with asgi(mock_server) as (http, _):
        answers = [
            await http.post(
                "/a2a",
                content=body,
                headers={"content-type": "application/json", "A2A-Version": "1.0"},
            )
            for body in bodies
        ]
    codes = [answer.json()["error"]["code"] for answer in answers]
    assert codes == [-32700, -32700, -32600, -32600, -32600, -32602, -32600]
    assert all(answer.json()["jsonrpc"] == "2.0" for answer in answers)
    assert all(answer.status_code == 200 for answer in answers)
    assert not [r for r in caplog.records if r.exc_info]
    assert mock_server.requests == []


def _a2a_send(text: str, context_id: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "ROLE_USER",
        "messageId": f"m-{text}",
        "parts": [{"text": text}],
    }
    if context_id is not None:
        message["contextId"] = context_id
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_principals_see_only_their_own_sessions_and_tasks(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """A token file maps tokens to principals: bob can neither read, list, abort nor continue
    alice's page sessions, ``X-Session-Id`` sessions, A2A tasks or contexts."""
    mock_server.default = Reply.text("ok")
    tokens = tmp_path / "tokens"
    tokens.write_text(f"# principal token\nalice {ALICE}\nbob   {BOB}  # the second\n")
    principals = Principals.from_file(tokens)
    alice = {"authorization": f"Bearer {ALICE}", "A2A-Version": "1.0"}
    bob = {"authorization": f"Bearer {BOB}", "A2A-Version": "1.0"}
    async with asgi(mock_server, principals=principals) as (http, served):
        async with http.stream(
            "POST", "/api/chat/s1", json={"message": "alice's secret"}, headers=alice
        ) as turn:
            await turn.aread()
        await http.post(
            "/v1/chat/completions",
            json=chat_body("alice's api secret"),
            headers={**alice, "X-Session-Id": "api"},
        )
        sent = (await http.post("/a2a", json=_a2a_send("alice's task"), headers=alice)).json()
        task = sent["result"]["task"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}}
        cancel = {**get, "method": "CancelTask"}
        mine = await http.get("/api/history/s1", headers=alice)
        theirs = await http.get("/api/history/s1", headers=bob)
        listed = {
            who: [s["id"] for s in (await http.get("/api/sessions", headers=h)).json()["sessions"]]
            for who, h in (("alice", alice), ("bob", bob))
        }
        abort = await http.post("/api/abort/s1", json={}, headers=bob)
        task_alice = (await http.post("/a2a", json=get, headers=alice)).json()
        task_bob = (await http.post("/a2a", json=get, headers=bob)).json()
        cancel_bob = (await http.post("/a2a", json=cancel, headers=bob)).json()
        await http.post("/a2a", json=_a2a_send("bob joins", task["contextId"]), headers=bob)
        await http.post(
            "/v1/chat/completions",
            json=chat_body("bob here"),
            headers={**bob, "X-Session-Id": "api"},
        )
        nobody = await http.get("/api/sessions")
        ids = served.session_ids
    assert mine.status_code == 200
    assert mine.json()["session"] == "s1"
    assert theirs.status_code == 404
    assert "alice" not in theirs.text
    assert listed == {"alice": ["s1", "api", task["contextId"]], "bob": []}
    assert abort.json() == {"aborted": False}
    assert task_alice["result"]["id"] == task["id"]
    assert task_bob["error"]["code"] == -32001  # task not found
    assert cancel_bob["error"]["code"] == -32001
    # Bob's turns in "alice's" context and session id saw none of alice's conversation.
    bob_prompts = [json.dumps(r.json["messages"]) for r in mock_server.requests[3:]]
    assert len(bob_prompts) == 2
    assert not any("alice" in prompt for prompt in bob_prompts)
    assert nobody.status_code == 401
    assert sorted(ids) == sorted(
        [
            "alice.s1",
            "alice.api",
            f"alice.{task['contextId']}",
            f"bob.{task['contextId']}",
            "bob.api",
        ]
    )


async def test_responses_and_deferred_turns_are_their_principals_own(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """Bob gets 404 for alice's ``previous_response_id``, and bob's tool results on alice's
    call ids continue bob's messages only: the server-side part of alice's deferred turn (her
    server tool's result) never reaches bob's model call."""
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object"}},
    }
    mock_server.script(
        Reply.text("alice's first answer"),
        Reply.tool_calls(
            ToolCallSpec("lookup", {"key": "alice"}, id="s1"),
            ToolCallSpec("get_weather", {}, id="c1"),
        ),
        Reply.text("bob's continuation"),
        Reply.text("alice's continuation"),
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    alice = {"authorization": f"Bearer {ALICE}"}
    bob = {"authorization": f"Bearer {BOB}"}
    async with asgi(mock_server, principals=Principals.from_file(tokens)) as (http, _):
        first = (await http.post("/v1/responses", json={"input": "hi"}, headers=alice)).json()
        follow = {"input": "and then?", "previous_response_id": first["id"]}
        bob_follow = await http.post("/v1/responses", json=follow, headers=bob)
        asked = [{"role": "user", "content": "weather?"}]
        called = await http.post(
            "/v1/chat/completions", json={"messages": asked, "tools": [weather]}, headers=alice
        )
        call = called.json()["choices"][0]["message"]["tool_calls"][0]
        back = {
            "messages": [
                *asked,
                {"role": "assistant", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call["id"], "content": "sunny"},
            ],
            "tools": [weather],
        }
        bob_back = await http.post("/v1/chat/completions", json=back, headers=bob)
        alice_back = await http.post("/v1/chat/completions", json=back, headers=alice)
    assert bob_follow.status_code == 404
    assert bob_follow.json()["error"]["code"] == "previous_response_not_found"
    assert called.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert bob_back.status_code == alice_back.status_code == 200
    bob_sent = json.dumps(mock_server.requests[2].json["messages"])
    alice_sent = json.dumps(mock_server.requests[3].json["messages"])
    assert "internal record of alice" not in bob_sent
    assert "internal record of alice" in alice_sent


async def test_a_principal_at_its_cap_is_refused_while_another_is_served(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """With one running turn and one session per principal: alice, with a turn running,
    gets 429 ``capacity_principal_turns`` while bob's turn is served; alice, with a session
    open, gets 429 ``capacity_principal_sessions`` for a second one while bob opens his."""
    mock_server.script(
        Reply.text("alice's slow answer", ttft=1.0),
        Reply.text("bob's answer"),
        Reply.text("alice's session"),
        Reply.text("bob's session"),
    )
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    alice = {"authorization": f"Bearer {ALICE}"}
    bob = {"authorization": f"Bearer {BOB}"}
    limits = ServeLimits(max_turns_per_principal=1, max_sessions_per_principal=1)
    url = "/v1/chat/completions"
    async with asgi(mock_server, limits, principals=Principals.from_file(tokens)) as (http, served):
        replies: dict[str, httpx.Response] = {}

        async def slow() -> None:
            replies["slow"] = await http.post(url, json=chat_body("hi"), headers=alice)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(slow)
            assert await eventually(lambda: served.running == 1)
            second = await http.post(url, json=chat_body("again"), headers=alice)
            bobs = await http.post(url, json=chat_body("me too"), headers=bob)
        own = await http.post(url, json=chat_body("a"), headers={**alice, "X-Session-Id": "a"})
        more = await http.post(url, json=chat_body("b"), headers={**alice, "X-Session-Id": "b"})
        bob_own = await http.post(url, json=chat_body("b"), headers={**bob, "X-Session-Id": "b"})
    assert replies["slow"].status_code == 200
    assert second.status_code == 429
    assert second.json()["error"]["code"] == "capacity_principal_turns"
    assert bobs.status_code == 200
    assert bobs.json()["choices"][0]["message"]["content"] == "bob's answer"
    assert own.status_code == 200
    assert more.status_code == 429
    assert more.json()["error"]["code"] == "capacity_principal_sessions"
    assert bob_own.status_code == 200
    assert bob_own.json()["choices"][0]["message"]["content"] == "bob's session"


async def test_a_50_mb_body_is_refused_early_and_memory_stays_flat() -> None:
    """A chunked 50 MB upload (no Content-Length to refuse it by) is cut at the limit with a
    413; a lying Content-Length is refused before a byte is read. The server's RSS (this
    process: the server runs in it, the client sends 64 KiB at a time) barely moves."""
    policy = EdgePolicy(max_body_bytes=1024 * 1024)
    async with (
        OpenAICompatible(KEY, "mock-model", "http://127.0.0.1:9") as llm,
        running(
            lambda url: create_app(ServedAgent(chat_agent(llm)), url, token=None, edge=policy),
            policy=policy,
        ) as url,
    ):
        port = int(url.rsplit(":", 1)[1])
        process = psutil.Process()
        before = peak = process.memory_info().rss
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        chunk = b"10000\r\n" + b"[" * 0x10000 + b"\r\n"
        sent = 0
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(head)

            async def upload() -> None:
                nonlocal sent
                try:
                    while sent < 50 * 1024 * 1024:
                        await stream.send(chunk)
                        sent += 0x10000
                    await stream.send(b"0\r\n\r\n")
                except (anyio.BrokenResourceError, OSError):
                    return

            async def sample() -> None:  # the peak: freed buffers leave RSS by the end
                nonlocal peak
                while True:
                    peak = max(peak, process.memory_info().rss)
                    await anyio.sleep(0.002)

            with anyio.fail_after(GUARD):
                async with anyio.create_task_group() as group:
                    group.start_soon(upload)
                    group.start_soon(sample)
                    answer = await stream.receive(4096)
                    group.cancel_scope.cancel()
        grown = peak - before
        async with await anyio.connect_tcp("127.0.0.1", port) as stream:
            await stream.send(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n{}"
            )
            with anyio.fail_after(GUARD):
                lying = await stream.receive(4096)
    print(
        f"\n50 MB chunked upload: refused after {sent / 1e6:.1f} MB sent, "
        f"peak RSS +{grown / 1e6:.1f} MB"
    )
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert b"bodies are limited to 1048576 bytes" in answer
    assert sent < 50 * 1024 * 1024
    assert grown < 20 * 1024 * 1024
    assert lying.startswith(b"HTTP/1.1 413 ")


async def test_idle_and_slow_sockets_are_closed_after_the_timeout() -> None:
    """A socket that sends nothing, one that sends half a request head, and a keep-alive
    socket idle after its response are all closed by the server after the header timeout; a
    body slower than the body timeout gets a 408."""
    policy = EdgePolicy(header_timeout=0.5, keep_alive_timeout=0.5, body_timeout=0.5)
    async with (
        OpenAICompatible(KEY, "mock-model", "http://127.0.0.1:9") as llm,
        running(
            lambda url: create_app(ServedAgent(chat_agent(llm)), url, token=None, edge=policy),
            policy=policy,
        ) as url,
    ):
        port = int(url.rsplit(":", 1)[1])

        async def closed_after(first: bytes) -> tuple[float, bytes]:
            async with await anyio.connect_tcp("127.0.0.1", port) as stream:
                start = anyio.current_time()
                if first:
                    await stream.send(first)
                received = b""
                with anyio.fail_after(5):
                    try:
                        while True:
                            received += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        pass
                return anyio.current_time() - start, received

        heads = {
            "idle": b"",
            "slow": b"GET /health HTTP/1.1\r\nHost: 127.0",
            "kept": b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            "body": b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"mess',
        }
        seen: dict[str, tuple[float, bytes]] = {}

        async def probe(name: str) -> None:
            seen[name] = await closed_after(heads[name])

        async with anyio.create_task_group() as group:
            for name in heads:
                group.start_soon(probe, name)
        idle, slow, kept, body = (seen[name] for name in heads)
    assert idle[0] < 2.0
    assert idle[1] == b""
    assert slow[0] < 2.0
    assert slow[1] == b""
    assert kept[0] < 2.0
    assert kept[1].startswith(b"HTTP/1.1 200 ")
    assert body[0] < 2.0
    assert body[1].startswith(b"HTTP/1.1 408 ")
    assert b"did not arrive within 0.5 s" in body[1]


async def test_connections_beyond_the_cap_get_503() -> None:
    policy = EdgePolicy(max_connections=2)
    async with (
        OpenAICompatible(KEY, "mock-model", "http://127.0.0.1:9") as llm,
        running(
            lambda url: create_app(ServedAgent(chat_agent(llm)), url, token=None), policy=policy
        ) as url,
    ):
        port = int(url.rsplit(":", 1)[1])
        async with (
            await anyio.connect_tcp("127.0.0.1", port),
            await anyio.connect_tcp("127.0.0.1", port),
            await anyio.connect_tcp("127.0.0.1", port) as third,
        ):
            await third.send(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            with anyio.fail_after(GUARD):
                answer = await third.receive()
    assert answer.startswith(b"HTTP/1.1 503 ")


def test_tokens_never_come_from_the_command_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "agent.yml"
    config.write_text("model: openai:m\n")
    for command in ("web", "serve"):
        with pytest.raises(SystemExit) as refused:
            main([command, str(config), "--token", "s3cret-on-argv"])
        assert refused.value.code == 2
        assert "--token is gone" in capsys.readouterr().err


def test_token_files_and_allowed_hosts_are_checked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = {
        "alice\n": "expected 'PRINCIPAL TOKEN'",
        "al.ice 0123456789abcdef\n": "expected 'PRINCIPAL TOKEN'",
        "alice short\n": "16 characters",
        "a 0123456789abcdef\na 0123456789abcdeX\n": "given twice",
        "# nobody\n": "names no principal",
    }
    for text, error in bad.items():
        path = tmp_path / "tokens"
        path.write_text(text)
        with pytest.raises(ConfigError, match=error):
            Principals.from_file(path)
    path.write_text(f"alice {ALICE}\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, logger="simplellmfunc.serve"):
        assert repr(Principals.from_file(path)) == "Principals(['alice'])"  # never a token
    assert "readable by other users" in caplog.text
    with pytest.raises(UserError, match="not both"):
        Principals.resolve("T", path, environ={"T": "x"})
    with pytest.raises(UserError, match="loopback only"):
        Principals.resolve("T", None, no_auth=True, host="0.0.0.0", environ={})
    assert allowed_hosts_for("127.0.0.1") == {"127.0.0.1", "localhost", "::1"}
    assert allowed_hosts_for("10.0.0.5") == {"10.0.0.5"}
    assert allowed_hosts_for("0.0.0.0", ["Box.lan"]) == {"box.lan"}
    with pytest.raises(UserError, match="--allowed-host"):
        allowed_hosts_for("0.0.0.0")
    policy = EdgePolicy(allowed_hosts=allowed_hosts_for("::1"))
    assert all(map(policy.host_allowed, ["[::1]:8000", "localhost", "127.0.0.1:1"]))
    assert not any(map(policy.host_allowed, ["evil.example", "127.0.0.1.evil.example", ""]))
    with pytest.raises(RequestRefusedError, match="NaN is not JSON") as nan:
        parse_json_body(b'{"temperature": NaN}')
    assert (nan.value.status, nan.value.code) == (400, "invalid_json")
    value, body = parse_json_body(b'{"k\\udfff": ["\\ud800x"]}')
    assert value == {"k\ufffd": ["\ufffdx"]}
    assert json.loads(body) == value


def test_serve_settings_take_token_files_hosts_and_limits(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    tokens.chmod(0o600)
    config = load_agent_config(
        write(
            tmp_path / "agent.yml",
            "model: openai:m\nserve:\n  allowed_hosts: [box.lan]\n  max_body_bytes: 2048\n"
            "  header_timeout: 3\n  max_connections: 9\n",
        ),
        environ={"OPENAI_API_KEY": KEY},
    )
    settings = ServeSettings.resolve(
        config, host="0.0.0.0", token_file=str(tokens), allowed_hosts=["api.lan"], environ={}
    )
    assert settings.principals.scoped
    assert len(settings.principals) == 2
    assert settings.principals.authenticate(BOB) == Principal("bob", scoped=True)
    assert settings.principals.authenticate("nope") is None
    edge = settings.edge
    assert edge.allowed_hosts == {"box.lan", "api.lan"}
    assert (edge.max_body_bytes, edge.header_timeout, edge.max_connections) == (2048, 3.0, 9)
    single = ServeSettings.resolve(config, environ={"SIMPLELLMFUNC_SERVE_TOKEN": ALICE})
    assert not single.principals.scoped
    assert single.edge.allowed_hosts == {"127.0.0.1", "localhost", "::1", "box.lan"}


async def test_web_and_serve_commands_take_token_files_and_allowed_hosts(tmp_path: Path) -> None:
    """``web --token-file`` serves each principal with its own token (the printed address
    shows no token); ``serve`` on every interface without ``--allowed-host`` refuses to start."""
    tokens = tmp_path / "tokens"
    tokens.write_text(f"alice {ALICE}\nbob {BOB}\n")
    tokens.chmod(0o600)
    config = write(tmp_path / "agent.yml", "name: helper\nmodel: openai:mock-model\n")
    env = clean_env({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://127.0.0.1:9"})
    wildcard = await start_cli(
        "serve",
        config,
        "--host",
        "0.0.0.0",
        env={**env, "SIMPLELLMFUNC_SERVE_TOKEN": ALICE},
        cwd=tmp_path,
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    web = await start_cli(
        "web", config, "--port", str(port), "--token-file", tokens, env=env, cwd=tmp_path
    )
    try:
        assert web.stderr is not None
        with anyio.fail_after(GUARD * 2):  # the address is printed once the socket is bound
            line = b""
            while b"\n" not in line:
                line += await web.stderr.receive(1)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=GUARD) as http:
            statuses = [
                (
                    await http.get("/api/sessions", headers={"authorization": f"Bearer {t}"})
                ).status_code
                for t in (ALICE, BOB, "wrong-token-0123456789")
            ]
            rebound = await http.get(
                "/api/sessions",
                headers={"authorization": f"Bearer {ALICE}", "host": "evil.example"},
            )
    finally:
        web.send_signal(signal.SIGINT)
        done = await finish(web)
    refused = await finish(wildcard)
    assert statuses == [200, 200, 401]
    assert rebound.status_code == 421
    assert done.code == 0, done.stderr
    assert line.decode() == f"helper: open http://127.0.0.1:{port}/?token=<your token>\n"
    assert ALICE not in done.stderr
    assert BOB not in done.stderr
    assert refused.code == 2
    assert "--allowed-host" in refused.stderr


async def test_served_connections_send_small_writes_at_once() -> None:
    """The listening socket of every server (``serving._uvicorn.bind``) gives asyncio
    connections with ``TCP_NODELAY``: a response's head and body are not held back for the
    client's delayed ACK (40 ms a request before)."""
    import asyncio
    import socket

    from simplellmfunc.serving._uvicorn import bind

    accepted: list[bool] = []
    seen = asyncio.Event()

    def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.append(bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))
        seen.set()
        writer.close()

    listening = bind("127.0.0.1", 0)
    server = await asyncio.start_server(connected, sock=listening)
    async with server:
        port = listening.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        with anyio.fail_after(10):
            await seen.wait()
        writer.close()
        await writer.wait_closed()
    assert accepted == [True]
