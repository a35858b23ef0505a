"""The mock LLM server, tested at the wire with raw httpx and raw sockets."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import psutil
import pytest

import simplellmfunc.testing as kit
from simplellmfunc._usage import Usage
from simplellmfunc.exceptions import UserError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec, key_fingerprint

BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}
STREAM = {**BODY, "stream": True}


async def _settle(check: Any) -> bool:
    """Give closing transports a few loop turns; True once ``check()`` holds."""
    for _ in range(200):
        if check():
            return True
        await asyncio.sleep(0.005)
    return bool(check())


@pytest.fixture(autouse=True)
async def no_leaks() -> AsyncIterator[None]:
    proc = psutil.Process()
    fds = proc.num_fds()
    tasks = asyncio.all_tasks()
    yield

    def extra_tasks() -> set[asyncio.Task[Any]]:
        return asyncio.all_tasks() - tasks - {asyncio.current_task()}

    assert await _settle(lambda: not extra_tasks()), extra_tasks()
    assert await _settle(lambda: proc.num_fds() <= fds), (proc.num_fds(), fds)


@pytest.fixture
async def server() -> AsyncIterator[MockLLMServer]:
    # Async fixtures enter and exit in different tasks: the server must not mind.
    async with MockLLMServer() as srv:
        yield srv


@pytest.fixture
async def client(server: MockLLMServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.url) as http:
        yield http


async def _collect(client: httpx.AsyncClient, body: dict[str, Any], into: bytearray) -> None:
    async with client.stream("POST", "/chat/completions", json=body) as response:
        async for chunk in response.aiter_raw():
            into += chunk


async def _stream_raw(client: httpx.AsyncClient, body: dict[str, Any]) -> bytes:
    async with client.stream("POST", "/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return b"".join([chunk async for chunk in response.aiter_raw()])


def _events(raw: bytes, eol: str = "\n") -> list[str]:
    """The data of each event (comments dropped)."""
    blocks = raw.decode().split(eol + eol)
    assert blocks[-1] == ""
    out = []
    for block in blocks[:-1]:
        lines = [line for line in block.split(eol) if not line.startswith(":")]
        if lines:
            out.append("\n".join(line.removeprefix("data: ") for line in lines))
    return out


def _chunks(raw: bytes) -> list[dict[str, Any]]:
    events = _events(raw)
    assert events[-1] == "[DONE]"
    return [json.loads(event) for event in events[:-1]]


def test_public_surface() -> None:
    # Sorted as ruff's RUF022 sorts it: CONSTANTS, then Classes, then functions.
    assert kit.__all__ == sorted(
        kit.__all__, key=lambda n: (not n.isupper(), not n[0].isupper(), n)
    )
    assert {"MockLLMServer", "RecordedRequest", "Reply", "ToolCallSpec"} <= set(kit.__all__)


async def test_non_stream_text_shape(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/v1"
    server.script(Reply.text("Hello world", reasoning="think", usage=(7, 3)))
    response = await client.post("/chat/completions", json=BODY)
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "req_mock_1"
    data = response.json()
    assert data["id"].startswith("chatcmpl-")
    assert data["object"] == "chat.completion"
    assert isinstance(data["created"], int)
    assert data["model"] == "gpt-test"
    choice = data["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello world"
    assert choice["message"]["reasoning_content"] == "think"
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "stop"
    assert data["usage"]["prompt_tokens"] == 7
    assert data["usage"]["completion_tokens"] == 3
    assert data["usage"]["total_tokens"] == 10


async def test_non_stream_tool_calls(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    calls = (ToolCallSpec("add", {"a": 1, "b": 2}, id="call_1"), ToolCallSpec("bad", '{"x": '))
    server.script(
        Reply.tool_calls(*calls, usage=None),
        Reply.tool_calls(calls[0], text="Let me add.", finish_reason="length", usage=Usage(5, 2)),
    )
    first = (await client.post("/chat/completions", json=BODY)).json()
    message = first["choices"][0]["message"]
    assert message["content"] is None
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert "usage" not in first
    assert message["tool_calls"][0] == {
        "id": "call_1",
        "type": "function",
        "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 2})},
    }
    assert message["tool_calls"][1]["function"]["arguments"] == '{"x": '
    assert message["tool_calls"][1]["id"].startswith("call_")
    second = (await client.post("/chat/completions", json=BODY)).json()
    assert second["choices"][0]["message"]["content"] == "Let me add."
    assert second["choices"][0]["finish_reason"] == "length"
    assert second["usage"]["total_tokens"] == 7


async def test_stream_text_framing(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("Hello world", chunks=3), Reply.text("again", chunks=2))
    raw = await _stream_raw(client, STREAM)
    assert raw.startswith(b"data: {")
    assert raw.endswith(b"data: [DONE]\n\n")
    chunks = _chunks(raw)
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    texts = [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]]
    assert texts == ["Hell", "o wo", "rld"]
    assert chunks[-1]["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "stop",
    }
    assert all("usage" not in c for c in chunks)
    assert server.requests[0].json["stream"] is True
    # The connection is reused for the next request (keep-alive).
    assert _chunks(await _stream_raw(client, STREAM))[1]["choices"][0]["delta"]["content"] == "aga"


async def test_stream_usage_only_when_asked(
    server: MockLLMServer, client: httpx.AsyncClient
) -> None:
    asked = {**STREAM, "stream_options": {"include_usage": True}}
    server.script(Reply.text("hi", usage=(4, 2)), Reply.text("hi", usage=None))
    chunks = _chunks(await _stream_raw(client, asked))
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["total_tokens"] == 6
    assert all(c["usage"] is None for c in chunks[:-1])
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    without = _chunks(await _stream_raw(client, asked))
    assert all(c["choices"] for c in without)


def _assemble(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assemble tool calls as a tolerant client does: a new id or a new index starts a call."""
    calls: list[dict[str, Any]] = []
    for chunk in chunks:
        for delta in chunk["choices"][0]["delta"].get("tool_calls", []):
            current = calls[-1] if calls else None
            if (
                current is None
                or (delta.get("id") and delta["id"] != current["id"])
                or ("index" in delta and delta["index"] != current["index"])
            ):
                current = {"id": delta.get("id"), "index": delta.get("index"), "args": ""}
                calls.append(current)
            current["name"] = delta["function"].get("name", current.get("name"))
            current["args"] += delta["function"].get("arguments", "")
    return calls


@pytest.mark.parametrize(
    "shape", ["standard", "repeat_id_name", "all_index_0", "no_index", "no_id"]
)
async def test_tool_call_delta_shapes(
    server: MockLLMServer, client: httpx.AsyncClient, shape: kit.DeltaShape
) -> None:
    calls = (ToolCallSpec("add", {"a": 1, "b": 2}, id="c1"), ToolCallSpec("mul", {"x": 3}, id="c2"))
    server.script(Reply.tool_calls(*calls, chunks=3, delta_shape=shape))
    chunks = _chunks(await _stream_raw(client, STREAM))
    first = chunks[0]["choices"][0]["delta"]
    assert first["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    deltas = [d for c in chunks for d in c["choices"][0]["delta"].get("tool_calls", [])]
    assert len(deltas) == 2 * (1 + 3)
    if shape == "standard":
        assert [d["index"] for d in deltas] == [0] * 4 + [1] * 4
        assert [("id" in d, "name" in d["function"]) for d in deltas[:4]] == [(True, True)] + [
            (False, False)
        ] * 3
    elif shape == "repeat_id_name":
        assert all(d["id"] in ("c1", "c2") and d["function"]["name"] for d in deltas)
    elif shape == "all_index_0":
        assert {d["index"] for d in deltas} == {0}
        assert [d["id"] for d in deltas if "id" in d] == ["c1", "c2"]
    elif shape == "no_index":
        assert all("index" not in d for d in deltas)
    else:
        assert all("id" not in d for d in deltas)
        assert [d["index"] for d in deltas] == [0] * 4 + [1] * 4
    assembled = _assemble(chunks)
    assert [(c["name"], json.loads(c["args"])) for c in assembled] == [
        ("add", {"a": 1, "b": 2}),
        ("mul", {"x": 3}),
    ]


async def test_stream_reasoning_and_text_before_calls(
    server: MockLLMServer, client: httpx.AsyncClient
) -> None:
    server.script(Reply.tool_calls(ToolCallSpec("f", "{}"), text="ok", reasoning="hmm", chunks=2))
    deltas = [c["choices"][0]["delta"] for c in _chunks(await _stream_raw(client, STREAM))]
    assert deltas[0] == {"role": "assistant", "content": "", "refusal": None}
    assert [d.get("reasoning_content") for d in deltas[1:3]] == ["hm", "m"]
    assert [d.get("content") for d in deltas[3:5]] == ["o", "k"]
    assert deltas[5]["tool_calls"][0]["function"] == {"name": "f", "arguments": ""}


async def test_disconnect_after(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("abcdef", chunks=6, disconnect_after=3))
    received = bytearray()
    with pytest.raises(httpx.RemoteProtocolError):
        await _collect(client, STREAM, received)
    events = _events(bytes(received))
    assert len(events) == 3
    assert "[DONE]" not in events


async def test_non_stream_faults(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("abc", disconnect_after=10), Reply.text("abc", malformed=True))
    with pytest.raises(httpx.RemoteProtocolError):
        await client.post("/chat/completions", json=BODY)
    truncated = await client.post("/chat/completions", json=BODY)
    assert truncated.status_code == 200
    with pytest.raises(ValueError):
        truncated.json()


async def test_malformed_line(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("abcd", chunks=4, malformed=True))
    events = _events(await _stream_raw(client, STREAM))
    assert events[-1] == "[DONE]"
    broken = []
    for event in events[:-1]:
        try:
            json.loads(event)
        except ValueError:
            broken.append(event)
    assert len(broken) == 1
    assert events.index(broken[0]) not in (0, len(events) - 1)


async def test_error_event_styles(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    error = {"message": "overloaded", "type": "server_error"}
    server.script(
        Reply.text("abc", chunks=3, error_event=error),
        Reply.text("abc", error_event=error, error_event_style="event", disconnect_after=1),
        Reply.text("abc", error_event=error),
    )
    events = _events(await _stream_raw(client, STREAM))
    assert json.loads(events[-1]) == {"error": error}
    assert len(events) == 5
    assert "[DONE]" not in events
    received = bytearray()
    with pytest.raises(httpx.RemoteProtocolError):
        await _collect(client, STREAM, received)
    assert received.decode().endswith(
        'event: error\ndata: {"error":{"message":"overloaded","type":"server_error"}}\n\n'
    )
    plain = await client.post("/chat/completions", json=BODY)
    assert plain.status_code == 200
    assert plain.json() == {"error": error}


async def test_keepalive_and_line_endings(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(
        Reply.text("abc", chunks=3, keepalive=True),
        Reply.text("abc", chunks=3, line_ending="crlf"),
        Reply.text("abc", chunks=3, line_ending="cr", keepalive=True),
    )
    raw = await _stream_raw(client, STREAM)
    assert raw.count(b": keep-alive\n\n") == len(_events(raw)) - 1
    crlf = await _stream_raw(client, STREAM)
    assert crlf.count(b"\r\n\r\n") == 6
    assert b"\n\n" not in crlf.replace(b"\r\n", b"")
    assert _events(crlf, "\r\n")[-1] == "[DONE]"
    cr = await _stream_raw(client, STREAM)
    assert b"\n" not in cr
    assert b": keep-alive\r\r" in cr
    assert _events(cr, "\r")[-1] == "[DONE]"


async def test_empty_events(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("abc", chunks=3, empty_events=True))
    raw = await _stream_raw(client, STREAM)
    events = _events(raw)
    assert events.count("data:") == len(events) // 2  # one before each event but the first
    assert [e for e in events if e != "data:"][-1] == "[DONE]"


@pytest.mark.parametrize("path", ["/chat/completions", "/responses", "/messages"])
async def test_ignore_stream_answers_with_the_json_reply(
    server: MockLLMServer, client: httpx.AsyncClient, path: str
) -> None:
    server.script(Reply.text("whole", ignore_stream=True))
    body = {**STREAM, "input": "hi", "max_tokens": 10}
    response = await client.post(path, json=body)
    assert response.headers["content-type"] == "application/json"
    assert "whole" in response.text
    assert isinstance(response.json(), dict)


async def test_split_utf8(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(Reply.text("héllo wörld ✓", chunks=3, split_utf8=True))
    async with client.stream("POST", "/chat/completions", json=STREAM) as response:
        pieces = [chunk async for chunk in response.aiter_raw()]
    broken = 0
    for piece in pieces:
        try:
            piece.decode()
        except UnicodeDecodeError:
            broken += 1
    assert broken >= 3
    chunks = _chunks(b"".join(pieces))
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "héllo wörld ✓"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_lone_surrogates_go_as_escapes_or_as_bytes(
    server: MockLLMServer, client: httpx.AsyncClient, stream: bool
) -> None:
    text = "half \ud83d pair \ud83d\ude00 cut \udce4\udcb8"  # the last two: b"\xe4\xb8"
    server.script(Reply.text(text), Reply.text(text, surrogates="bytes"))
    body = STREAM if stream else BODY
    escaped = (await client.post("/chat/completions", json=body)).content
    raw = (await client.post("/chat/completions", json=body)).content
    assert b"half \\ud83d pair \\ud83d\\ude00 cut \\udce4\\udcb8" in escaped
    assert b"half \\ud83d pair \\ud83d\\ude00 cut \xe4\xb8" in raw  # invalid UTF-8
    escaped.decode()  # valid UTF-8
    with pytest.raises(UnicodeDecodeError):
        raw.decode()


async def test_timing_and_headers(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    headers = {"x-request-id": "req_custom", "x-should-retry": "false", "retry-after-ms": "5"}
    server.script(
        Reply.text("abc", chunks=3, ttft=0.01, chunk_delay=0.002, headers=headers),
        Reply.text("abc", ttft=0.01, headers=headers),
    )
    async with client.stream("POST", "/chat/completions", json=STREAM) as response:
        assert response.headers["x-request-id"] == "req_custom"
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    assert len(_chunks(raw)) == 5
    response = await client.post("/chat/completions", json=BODY)
    assert response.headers["x-should-retry"] == "false"
    assert response.json()["choices"][0]["message"]["content"] == "abc"


async def test_drip_until_client_leaves(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    baseline = asyncio.all_tasks()
    server.script(Reply.text("x", drip=0.005), Reply.text("x", drip=0.005))
    for body, piece in ((STREAM, b'"content":"."'), (BODY, b" ")):
        async with client.stream("POST", "/chat/completions", json=body) as response:
            seen = 0
            async for chunk in response.aiter_raw():
                seen += chunk.count(piece)
                if seen >= 3:
                    break
        # Leaving the block closes the connection; the server notices and stops dripping.
        assert await _settle(lambda: not asyncio.all_tasks() - baseline - {asyncio.current_task()})


async def test_error_replies(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.script(
        Reply.error(429, "slow down", headers={"retry-after": "1"}),
        Reply.error(401, code="invalid_api_key"),
        Reply.error(502, body="<html>bad gateway</html>"),
        Reply.error(400, body={"detail": "nope"}),
    )
    limited = await client.post("/chat/completions", json=STREAM)
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "1"
    assert limited.json() == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": None}
    }
    auth = (await client.post("/chat/completions", json=BODY)).json()["error"]
    assert (auth["type"], auth["code"]) == ("authentication_error", "invalid_api_key")
    gateway = await client.post("/chat/completions", json=BODY)
    assert (gateway.status_code, gateway.text) == (502, "<html>bad gateway</html>")
    assert (await client.post("/chat/completions", json=BODY)).json() == {"detail": "nope"}


async def test_recording_and_redaction(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    secret = "sk-proj-SECRETSECRET-ab12"
    server.default = Reply.text("ok")
    await client.post(
        "/chat/completions?api-version=1",
        content=json.dumps(BODY).encode(),
        headers={"Authorization": f"Bearer {secret}", "X-Api-Key": secret, "api-key": "short"},
    )
    await client.post("/chat/completions", content=b"not json")
    first, second = server.requests
    assert (first.method, first.path) == ("POST", "/v1/chat/completions?api-version=1")
    assert first.headers["authorization"] == "Bearer sk-...ab12"
    assert first.headers["x-api-key"] == "sk-...ab12" == key_fingerprint(secret)
    assert first.headers["api-key"] == key_fingerprint("short") != "short"
    assert secret not in repr(server.requests)
    assert first.json == BODY
    assert first.body_bytes_len == len(json.dumps(BODY).encode())
    assert all(name == name.lower() for name in first.headers)
    assert (second.json, second.body_bytes_len) == (None, 8)
    with pytest.raises(AttributeError):
        first.path = "/x"  # type: ignore[misc]


async def test_script_queue_callable_and_default(
    server: MockLLMServer, client: httpx.AsyncClient
) -> None:
    async def content() -> Any:
        response = await client.post("/chat/completions", json=BODY)
        if response.status_code != 200:
            return response.status_code, response.json()["error"]["message"]
        return response.json()["choices"][0]["message"]["content"]

    server.script(Reply.text("one"), lambda request: Reply.text(request.json["model"]))
    assert server.pending == 2
    assert [await content(), await content()] == ["one", "gpt-test"]
    assert await content() == (500, "no scripted reply")
    server.default = lambda request: Reply.text(f"default {len(request.json['messages'])}")
    server.script(Reply.text("queued"))
    assert [await content(), await content()] == ["queued", "default 1"]
    assert len(server.requests) == 5
    server.script(Reply.text("dropped"))
    server.reset()
    assert (server.requests, server.pending) == ([], 0)
    assert await content() == "default 1"


async def _use_failing_callable() -> None:
    async with MockLLMServer() as server, httpx.AsyncClient(base_url=server.url) as http:
        server.script(lambda request: Reply.text(str(1 / 0)))
        response = await http.post("/chat/completions", json=BODY)
        assert response.status_code == 500
        assert "ZeroDivisionError" in response.json()["error"]["message"]


async def test_callable_errors_are_raised_at_exit() -> None:
    with pytest.raises(ZeroDivisionError):
        await _use_failing_callable()


async def test_reply_validation() -> None:
    with pytest.raises(UserError):
        Reply.text("x", chunks=0)
    with pytest.raises(UserError):
        Reply.tool_calls()
    with pytest.raises(UserError):
        Reply.text("x", drip=0)
    with pytest.raises(UserError):
        MockLLMServer().script("not a reply")  # type: ignore[arg-type]
    with pytest.raises(UserError):
        _ = MockLLMServer().url


async def test_routing_errors(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.default = Reply.text("ok")
    assert (await client.post("/images/generations", json=BODY)).status_code == 404
    assert (await client.get("/chat/completions")).status_code == 405
    assert (await client.post("/chat/completions", content=b"[1]")).status_code == 400
    assert len(server.requests) == 3
    assert server.pending == 0


async def _raw_exchange(server: MockLLMServer, payload: bytes) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
        await stream.send(payload)
        received = b""
        with anyio.fail_after(5):
            while True:
                try:
                    received += await stream.receive()
                except anyio.EndOfStream:
                    return received


async def test_raw_http_keep_alive_and_close(server: MockLLMServer) -> None:
    server.default = Reply.text("ok")
    body = json.dumps(BODY).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % len(body)
    keep, close = request + b"\r\n" + body, request + b"Connection: close\r\n\r\n" + body
    received = await _raw_exchange(server, keep + keep + close)
    assert received.count(b"HTTP/1.1 200 OK\r\n") == 3
    assert received.count(b"connection: close\r\n") == 1
    bad = await _raw_exchange(server, b"NOT A REQUEST\r\n\r\n")
    assert bad.startswith(b"HTTP/1.1 400 ")
    assert bad.endswith(
        b'"message":"malformed request","type":"mock_server_error","param":null,"code":null}}'
    )


async def test_raw_http_request_in_pieces(server: MockLLMServer) -> None:
    server.default = Reply.text("ok")
    body = json.dumps(BODY).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
    request += b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    cuts = [0, 10, 40, len(request) - len(body) - 1, len(request) - 5, len(request)]
    async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
        for start, end in itertools.pairwise(cuts):
            await stream.send(request[start:end])
            await anyio.sleep(0.002)  # let each piece arrive on its own
        received = b""
        with anyio.fail_after(5):
            while not received.endswith(b"}"):
                received += await stream.receive()
    assert received.startswith(b"HTTP/1.1 200 OK\r\n")
    assert json.loads(received.split(b"\r\n\r\n", 1)[1])["choices"][0]["message"]["content"] == "ok"
    assert server.requests[0].json == BODY


async def test_fifty_parallel_requests(server: MockLLMServer, client: httpx.AsyncClient) -> None:
    server.default = lambda request: Reply.text(
        "echo " + request.json["messages"][0]["content"], chunks=2
    )
    results: dict[int, str] = {}

    async def one(i: int) -> None:
        body = {"model": "m", "messages": [{"role": "user", "content": str(i)}]}
        if i % 2:
            raw = await _stream_raw(client, {**body, "stream": True})
            chunks = _chunks(raw)[1:-1]
            results[i] = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
        else:
            response = await client.post("/chat/completions", json=body)
            results[i] = response.json()["choices"][0]["message"]["content"]

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(one, i)
    assert results == {i: f"echo {i}" for i in range(50)}
    assert len(server.requests) == 50


async def _close_while_dripping(http: httpx.AsyncClient, server: MockLLMServer) -> None:
    url = f"{server.url}/chat/completions"
    async with http.stream("POST", url, json=STREAM) as response:
        async for _ in response.aiter_raw():
            await server.aclose()  # close while the drip task is writing


async def test_close_with_busy_connections_leaks_nothing() -> None:
    proc = psutil.Process()
    fds, tasks = proc.num_fds(), asyncio.all_tasks()
    async with (
        httpx.AsyncClient() as http,
        MockLLMServer(default=Reply.text("x", drip=0.01)) as server,
    ):
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            await _close_while_dripping(http, server)
    assert not asyncio.all_tasks() - tasks - {asyncio.current_task()}
    assert await _settle(lambda: proc.num_fds() <= fds)


async def test_cli_module() -> None:
    command = [sys.executable, "-m", "simplellmfunc.testing.mock_server", "--port", "0"]
    command += ["--reply-text", "okay", "--chunks", "4"]
    async with await anyio.open_process(command) as process:
        assert process.stdout is not None
        line = b""
        with anyio.fail_after(30):
            while not line.endswith(b"\n"):
                line += await process.stdout.receive()
        ready, url = line.decode().split()
        assert ready == "READY"
        assert url.endswith("/v1")
        async with httpx.AsyncClient(base_url=url) as http:
            chunks = _chunks(await _stream_raw(http, STREAM))
        assert [c["choices"][0]["delta"].get("content") for c in chunks[1:-1]] == list("okay")
        process.terminate()
        assert await process.wait() == 0


async def test_embeddings_are_deterministic_and_unscripted(mock_server: MockLLMServer) -> None:
    mock_server.script(kit.Reply.text("kept for the chat call"))
    async with httpx.AsyncClient(base_url=mock_server.url) as client:
        body = {"model": "m", "input": ["parse the file", "parsing files", "zebra"]}
        reply = (await client.post("/embeddings", json=body)).json()
        assert [item["index"] for item in reply["data"]] == [0, 1, 2]
        first, second, third = (item["embedding"] for item in reply["data"])
        assert len(first) == 64
        assert first == kit.hashed_embedding("parse the file")
        assert sum(a * b for a, b in zip(first, second, strict=True)) > 0.3  # "file(s)" shared
        assert sum(a * b for a, b in zip(first, third, strict=True)) == 0.0
        sized = await client.post("/embeddings", json={"input": "x", "dimensions": 8})
        assert len(sized.json()["data"][0]["embedding"]) == 8
        bad = await client.post("/embeddings", json={"input": [1, 2]})
        assert bad.status_code == 400
        assert "'input' must be" in bad.json()["error"]["message"]
    assert mock_server.pending == 1  # embeddings consume no scripted reply
