"""Errors that name their target: every connection error and timeout of an HTTP provider says
which server it was talking to, as ``scheme://host:port``, and never shows a key, credentials in
the URL or its query string.
"""

from __future__ import annotations

import socket
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import TokenBucket, llm_chat, llm_function
from simplellmfunc.exceptions import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from simplellmfunc.providers import (
    AnthropicCompatible,
    HTTPInterface,
    LLMRequest,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    RetryPolicy,
    _http,
)
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import UserMessage

KEY = "sk-target-test-SECRETKEY-0123456789"
SECRETS = ("SECRETKEY", "pw-SECRET", "q-SECRET", "?key", "/v1")
REQUEST = LLMRequest((UserMessage("hi"),))
NO_RETRY = RetryPolicy(max_retries=0)
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed
PROVIDERS: dict[str, type[HTTPInterface]] = {
    "chat": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}
MODES = ["complete", "stream"]


@pytest.fixture(params=sorted(PROVIDERS))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def closed_port() -> int:
    """A loopback port with nothing listening (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def call(llm: HTTPInterface, mode: str, request: LLMRequest = REQUEST) -> None:
    with anyio.fail_after(GUARD):
        if mode == "complete":
            await llm.complete(request)
            return
        async with aclosing(llm.stream(request)) as events:
            async for _ in events:
                pass


def assert_names(error: ProviderError, target: str) -> None:
    message = str(error)
    assert target in message, message
    for secret in SECRETS:
        assert secret not in message, (secret, message)


@pytest.mark.parametrize("mode", MODES)
async def test_a_refused_connection_names_scheme_host_and_port(api: str, mode: str) -> None:
    port = closed_port()
    url = f"http://user:pw-SECRET@127.0.0.1:{port}/v1?key=q-SECRET"
    async with PROVIDERS[api](KEY, "m", url, retry_policy=NO_RETRY) as llm:
        with pytest.raises(ProviderConnectionError) as caught:
            await call(llm, mode)
    assert_names(caught.value, f"http://127.0.0.1:{port}")
    assert "All connection attempts failed" in str(caught.value)


@pytest.mark.parametrize("mode", MODES)
async def test_a_deadline_before_the_response_names_the_target(
    mock_server: MockLLMServer, api: str, mode: str
) -> None:
    mock_server.default = Reply.text("late", ttft=5)
    async with PROVIDERS[api](KEY, "m", mock_server.url, retry_policy=NO_RETRY) as llm:
        with pytest.raises(ProviderTimeoutError) as caught:
            await call(llm, mode, LLMRequest(REQUEST.messages, timeout=0.3))
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


@pytest.mark.parametrize("mode", MODES)
async def test_a_read_timeout_before_the_headers_names_the_target(
    mock_server: MockLLMServer, api: str, mode: str
) -> None:
    mock_server.default = Reply.text("late", ttft=5)
    llm = PROVIDERS[api](KEY, "m", mock_server.url, retry_policy=NO_RETRY, read_timeout=0.2)
    async with llm:
        with pytest.raises(ProviderConnectionError, match="ReadTimeout") as caught:
            await call(llm, mode)
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


async def test_a_body_cut_while_reading_names_the_target(
    mock_server: MockLLMServer, api: str
) -> None:
    mock_server.default = Reply.text("a reply long enough to be cut", disconnect_after=20)
    async with PROVIDERS[api](KEY, "m", mock_server.url, retry_policy=NO_RETRY) as llm:
        with pytest.raises(ProviderConnectionError, match="while reading") as caught:
            await call(llm, "complete")
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


async def test_a_broken_stream_names_the_target(mock_server: MockLLMServer, api: str) -> None:
    mock_server.default = Reply.text("never finished", chunks=5, disconnect_after=3)
    async with PROVIDERS[api](KEY, "m", mock_server.url, retry_policy=NO_RETRY) as llm:
        with pytest.raises(StreamError, match="stream broken") as caught:
            await call(llm, "stream")
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


async def test_the_deadline_while_streaming_names_the_target(
    mock_server: MockLLMServer, api: str
) -> None:
    mock_server.default = Reply.text("drip", drip=0.05)
    async with PROVIDERS[api](KEY, "m", mock_server.url, retry_policy=NO_RETRY) as llm:
        with pytest.raises(ProviderTimeoutError, match="while streaming") as caught:
            await call(llm, "stream", LLMRequest(REQUEST.messages, timeout=0.4))
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


async def test_the_deadline_while_waiting_for_the_rate_limit_names_the_target(
    mock_server: MockLLMServer, api: str
) -> None:
    mock_server.default = Reply.text("ok")
    bucket = TokenBucket(capacity=1, refill_rate=0.001)
    async with PROVIDERS[api](KEY, "m", mock_server.url, rate_limit=bucket) as llm:
        await call(llm, "complete")
        with pytest.raises(ProviderTimeoutError, match="rate limit") as caught:
            await call(llm, "complete", LLMRequest(REQUEST.messages, timeout=0.3))
    assert_names(caught.value, f"http://127.0.0.1:{mock_server.port}")


@pytest.mark.parametrize("mode", ["plain", "stream", "events", "function"])
async def test_the_decorators_pass_the_named_error_on(mode: str) -> None:
    port = closed_port()
    llm = OpenAICompatible(KEY, "m", f"http://127.0.0.1:{port}/v1", retry_policy=NO_RETRY)

    @llm_chat(llm, stream=mode == "stream", enable_event=mode == "events")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    @llm_function(llm)
    async def answer(question: str) -> str:
        """Answer."""

    async def run() -> None:
        with anyio.fail_after(GUARD):
            if mode == "function":
                await answer("hi")
                return
            async with aclosing(agent("hi", history=[])) as items:
                async for _ in items:
                    pass

    async with llm:
        with pytest.raises(ProviderConnectionError) as caught:
            await run()
    assert_names(caught.value, f"http://127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("url", "target"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com:443"),
        ("http://localhost/v1", "http://localhost:80"),
        (
            "HTTPS://User:pw-SECRET@API.Example.com:8443/v1?key=q-SECRET",
            "https://api.example.com:8443",
        ),
        ("http://[::1]:9/v1", "http://[::1]:9"),
        ("localhost:8000/v1", "localhost:8000/v1 (not an http:// or https:// URL)"),
        ("http://h:port/v1?key=q-SECRET", "http://h:port/v1 (not an http:// or https:// URL)"),
    ],
)
def test_origin(url: str, target: str) -> None:
    assert _http.origin(url) == target
