"""The one stream driver under every HTTP provider, at the wire: the call deadline while
streaming, a broken stream, bytes after the terminal event, malformed events, an early end and
an early exit, for the Chat Completions, Responses and Anthropic Messages adapters alike."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import psutil
import pytest

from conftest import settle
from simplellmfunc.exceptions import ProviderTimeoutError, StreamError
from simplellmfunc.providers import (
    AnthropicCompatible,
    FinishEvent,
    HTTPInterface,
    LLMRequest,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    RetryPolicy,
    StreamEvent,
    TextDelta,
)
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import UserMessage

KEY = "sk-driver-test-0123456789"
REQUEST = LLMRequest((UserMessage("hi"),))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed
PROVIDERS: dict[str, type[HTTPInterface]] = {
    "chat": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}


def _sse(*events: tuple[str | None, dict[str, Any] | str]) -> str:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out)


def _reply_events(api: str, text: str) -> tuple[str, str]:
    """A hand-written stream of ``text`` in each API's wire format: (events, its end)."""
    if api == "chat":
        delta = {"model": "raw", "choices": [{"index": 0, "delta": {"content": text}}]}
        finish = {"model": "raw", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        return _sse((None, delta)), _sse((None, finish), (None, "[DONE]"))
    if api == "responses":
        kind = "response.output_text.delta"
        delta = {"type": kind, "output_index": 0, "delta": text}
        message = {"type": "message", "content": [{"type": "output_text", "text": text}]}
        usage = {"input_tokens": 3, "output_tokens": 1}
        final = {"id": "r1", "status": "completed", "output": [message], "usage": usage}
        done = {"type": "response.completed", "response": final}
        return _sse((kind, delta)), _sse(("response.completed", done))
    start = {"type": "message_start", "message": {"model": "raw", "usage": {"input_tokens": 3}}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    piece = {"type": "text_delta", "text": text}
    delta = {"type": "content_block_delta", "index": 0, "delta": piece}
    stop = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}}
    events = _sse(
        ("message_start", start),
        ("content_block_start", block),
        ("content_block_delta", delta),
    )
    return events, _sse(("message_delta", stop), ("message_stop", {"type": "message_stop"}))


@pytest.fixture(params=sorted(PROVIDERS))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def llm(api: str, mock_server: MockLLMServer) -> AsyncIterator[HTTPInterface]:
    async with PROVIDERS[api](KEY, "mock-model", mock_server.url, retry_policy=FAST) as llm:
        yield llm


async def consume(llm: HTTPInterface, received: list[StreamEvent], request: LLMRequest) -> None:
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(request)) as events:
            async for event in events:
                received.append(event)


def client_sockets(server: MockLLMServer) -> list[Any]:
    """The client side of this process's open TCP connections to the mock server."""
    return [
        c
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == server.port and c.status == psutil.CONN_ESTABLISHED
    ]


async def assert_released(server: MockLLMServer, llm: HTTPInterface) -> None:
    """The key is back in its pool and the half-read connection closed."""
    assert llm.key_pool is not None
    assert [s["in_flight"] for s in llm.key_pool.status()] == [0]
    assert await settle(lambda: not client_sockets(server)), client_sockets(server)


@pytest.mark.parametrize("read_timeout", [0.2, 120.0], ids=["fast-path-first", "scoped-reads"])
async def test_deadline_while_streaming(
    mock_server: MockLLMServer, api: str, read_timeout: float
) -> None:
    # A piece every 50 ms never trips the per-read timeout; only the call's deadline ends it.
    # With a short read timeout the first reads take the unscoped fast path, the last ones not.
    mock_server.script(Reply.text("drip", drip=0.05))
    llm = PROVIDERS[api](KEY, "m", mock_server.url, read_timeout=read_timeout)
    received: list[StreamEvent] = []
    async with llm:
        with pytest.raises(ProviderTimeoutError, match="deadline passed while streaming") as err:
            await consume(llm, received, LLMRequest(REQUEST.messages, timeout=0.6))
        await assert_released(mock_server, llm)
    assert (err.value.status, err.value.request_id) == (200, "req_mock_1")
    assert received
    assert all(isinstance(e, TextDelta) for e in received)
    assert len(mock_server.requests) == 1


async def test_broken_stream_is_a_retryable_stream_error(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("never finished", chunks=5, disconnect_after=4))
    received: list[StreamEvent] = []
    with pytest.raises(StreamError, match="stream broken") as caught:
        await consume(llm, received, REQUEST)
    assert (caught.value.status, caught.value.retryable) == (200, True)
    assert caught.value.request_id == "req_mock_1"
    assert not any(isinstance(e, FinishEvent) for e in received)
    assert len(mock_server.requests) == 1  # never retried once the headers arrived
    await assert_released(mock_server, llm)


async def test_malformed_event_is_a_final_stream_error(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("abcdef", chunks=6, malformed=True))
    with pytest.raises(StreamError, match="malformed stream") as caught:
        await consume(llm, [], REQUEST)
    assert (caught.value.status, caught.value.retryable) == (200, False)
    assert caught.value.request_id == "req_mock_1"
    assert len(mock_server.requests) == 1


async def test_bytes_after_the_terminal_event_are_read_not_parsed(
    mock_server: MockLLMServer, llm: HTTPInterface, api: str
) -> None:
    events, end = _reply_events(api, "whole")
    trailing = "data: {not json\n\n" + _sse(("error", {"type": "error", "error": {}}))
    mock_server.default = Reply.error(200, body=events + end + trailing)
    ports = set()
    for _ in range(3):
        received: list[StreamEvent] = []
        await consume(llm, received, REQUEST)
        final = received[-1]
        assert isinstance(final, FinishEvent)
        assert final.response.text == "whole"
        (idle,) = client_sockets(mock_server)  # read to its end: back in the pool
        ports.add(idle.laddr.port)
    assert len(ports) == 1


async def test_stream_ending_before_the_terminal_event(
    mock_server: MockLLMServer, llm: HTTPInterface, api: str
) -> None:
    events, _end = _reply_events(api, "cut")
    mock_server.script(Reply.error(200, body=events))
    received: list[StreamEvent] = []
    with pytest.raises(StreamError, match="stream ended before") as caught:
        await consume(llm, received, REQUEST)
    assert [e.text for e in received if isinstance(e, TextDelta)] == ["cut"]
    assert (caught.value.status, caught.value.retryable) == (200, api == "anthropic")


async def test_leaving_a_stream_early_releases_everything(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("forever", drip=0.01), Reply.text("next"))
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(REQUEST)) as events:
            async for _ in events:
                break
    await assert_released(mock_server, llm)
    assert (await llm.complete(REQUEST)).text == "next"
