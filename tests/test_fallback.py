"""FallbackLLM at the wire: two mock servers, fallback on availability errors only, never after
a stream started, and the answering interface reported in responses and engine events."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from simplellmfunc import llm_chat
from simplellmfunc.exceptions import (
    AuthenticationError,
    NoUsableKeyError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    StreamError,
    UserError,
)
from simplellmfunc.hooks import EventYield, LLMCallEndEvent, LLMCallErrorEvent, ResponseYield
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    OpenAICompatible,
    RetryPolicy,
    StreamEvent,
    TextDelta,
)
from simplellmfunc.providers._fallback import FallbackLLM, is_fallback_error
from simplellmfunc.testing import MockLLMServer, Reply, ScriptedLLM
from simplellmfunc.types import UserMessage

KEY = "sk-fallback-test-0123456789"
FAST = RetryPolicy(max_retries=1, initial_delay=0.01, max_delay=0.02)
REQUEST = LLMRequest((UserMessage("hi"),))
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed


class Pair:
    """Two mock servers and the FallbackLLM over their clients."""

    def __init__(self, first: MockLLMServer, second: MockLLMServer, **primary: Any) -> None:
        self.first, self.second = first, second
        options: dict[str, Any] = {"retry_policy": FAST, **primary}
        self.primary = OpenAICompatible(KEY, "m1", first.url, provider_name="primary", **options)
        self.secondary = OpenAICompatible(
            KEY, "m2", second.url, retry_policy=FAST, provider_name="secondary"
        )
        self.llm = FallbackLLM([self.primary, self.secondary])


@pytest.fixture
async def servers() -> AsyncIterator[tuple[MockLLMServer, MockLLMServer]]:
    async with MockLLMServer() as first, MockLLMServer() as second:
        yield first, second


@pytest.fixture
async def pair(servers: tuple[MockLLMServer, MockLLMServer]) -> AsyncIterator[Pair]:
    made = Pair(*servers)
    async with made.llm:
        yield made


async def collect(llm: FallbackLLM, request: LLMRequest = REQUEST) -> list[StreamEvent]:
    with anyio.fail_after(GUARD):
        return [event async for event in llm.stream(request)]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_primary_answers(pair: Pair) -> None:
    pair.first.script(Reply.text("from primary"))
    response = await pair.llm.complete(REQUEST)
    assert (response.text, response.provider) == ("from primary", "primary")
    assert pair.llm.last_used is pair.primary
    assert not pair.second.requests


async def test_5xx_after_retries_falls_back(pair: Pair) -> None:
    pair.first.default = Reply.error(503)
    pair.second.script(Reply.text("from secondary"))
    response = await pair.llm.complete(REQUEST)
    assert (response.text, response.provider, response.model) == (
        "from secondary",
        "secondary",
        "m2",
    )
    assert pair.llm.last_used is pair.secondary
    assert len(pair.first.requests) == 2  # the primary's own retry came first
    assert len(pair.second.requests) == 1


@pytest.mark.parametrize(
    ("reply", "error"),
    [(Reply.error(400), ProviderError), (Reply.error(401), AuthenticationError)],
)
async def test_rejections_propagate_at_once(
    pair: Pair, reply: Reply, error: type[ProviderError]
) -> None:
    pair.first.default = reply
    with pytest.raises(error) as caught:
        await pair.llm.complete(REQUEST)
    assert caught.value.status == reply.status
    assert caught.value.provider == "primary"
    assert not pair.second.requests


async def test_rate_limit_falls_back(pair: Pair) -> None:
    pair.first.default = Reply.error(429)
    pair.second.script(Reply.text("ok"))
    assert (await pair.llm.complete(REQUEST)).provider == "secondary"


async def test_connection_failure_falls_back(
    servers: tuple[MockLLMServer, MockLLMServer],
) -> None:
    first, second = servers
    made = Pair(first, second)
    await first.aclose()  # nothing listens on the primary's port any more
    second.script(Reply.text("ok"))
    async with made.llm:
        response = await made.llm.complete(REQUEST)
    assert response.provider == "secondary"


async def test_timeout_falls_back(servers: tuple[MockLLMServer, MockLLMServer]) -> None:
    made = Pair(*servers, timeout=0.3)
    made.first.default = Reply.text("late", ttft=5)
    made.second.script(Reply.text("on time"))
    async with made.llm:
        response = await made.llm.complete(REQUEST)
    assert response.text == "on time"


async def test_every_member_failing_raises_the_last_error(pair: Pair) -> None:
    pair.first.default = Reply.error(503)
    pair.second.default = Reply.error(502)
    with pytest.raises(ProviderError) as caught:
        await pair.llm.complete(REQUEST)
    assert caught.value.status == 502
    assert caught.value.provider == "secondary"
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert "fallback: primary (m1) failed first" in notes
    assert "status=503" in notes


async def test_stream_falls_back_on_an_error_status(pair: Pair) -> None:
    pair.first.default = Reply.error(500)
    pair.second.script(Reply.text("streamed reply", chunks=3))
    events = await collect(pair.llm)
    assert text_of(events) == "streamed reply"
    final = events[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.provider == "secondary"
    assert pair.llm.last_used is pair.secondary


async def test_stream_falls_back_before_the_first_byte(pair: Pair) -> None:
    # 200 and headers, then the connection drops before any event.
    pair.first.default = Reply.text("never seen", chunks=3, disconnect_after=0)
    pair.second.script(Reply.text("second try", chunks=2))
    events = await collect(pair.llm)
    assert text_of(events) == "second try"
    assert len(pair.first.requests) == 1  # a started response is never retried in place
    assert len(pair.second.requests) == 1


async def test_no_fallback_once_the_stream_started(pair: Pair) -> None:
    pair.first.script(Reply.text("one two three four", chunks=4, disconnect_after=3))
    seen: list[StreamEvent] = []

    async def consume() -> None:
        async for event in pair.llm.stream(REQUEST):
            seen.append(event)

    with anyio.fail_after(GUARD), pytest.raises(StreamError):
        await consume()
    assert text_of(seen)  # part of the reply had arrived
    assert pair.llm.last_used is pair.primary
    assert not pair.second.requests


async def test_capabilities_are_the_intersection(
    servers: tuple[MockLLMServer, MockLLMServer],
) -> None:
    first, second = servers
    a = OpenAICompatible(KEY, "a", first.url, context_window=128_000)
    b = OpenAICompatible(
        KEY,
        "b",
        second.url,
        capabilities=Capabilities(json_schema=False, stream_usage=False),
        context_window=32_000,
    )
    async with FallbackLLM([a, b]) as llm:
        assert llm.capabilities == Capabilities(json_schema=False, stream_usage=False)
        assert llm.context_window == 32_000
        assert llm.model_name == "a"
    with pytest.raises(UserError, match="closed"):
        await a.complete(REQUEST)  # closing the fallback closed its members


def test_needs_a_member() -> None:
    with pytest.raises(UserError):
        FallbackLLM([])


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProviderConnectionError("x"), True),
        (ProviderTimeoutError("x"), True),
        (RateLimitError("x", status=429), True),
        (NoUsableKeyError("x"), True),
        (ProviderError("x", status=503), True),
        (ProviderError("x", status=409, retryable=True), True),
        (StreamError("x", status=200, retryable=True), True),
        (StreamError("x", status=200), False),
        (ProviderError("x", status=400), False),
        (ProviderError("x", status=404), False),
        (AuthenticationError("x", status=401, retryable=True), False),
    ],
)
def test_which_errors_fall_back(error: ProviderError, expected: bool) -> None:
    assert is_fallback_error(error) is expected


@pytest.mark.parametrize("stream", [False, True])
async def test_llm_chat_events_name_the_secondary(pair: Pair, stream: bool) -> None:
    pair.first.default = Reply.error(503)
    pair.second.script(Reply.text("Hello from the secondary.", chunks=2))

    @llm_chat(pair.llm, stream=stream, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You are helpful."""

    with anyio.fail_after(GUARD):
        items = [item async for item in agent("hi", history=[])]
    events = [item.event for item in items if isinstance(item, EventYield)]
    ends = [e for e in events if isinstance(e, LLMCallEndEvent)]
    assert [(e.provider, e.model) for e in ends] == [("secondary", "m2")]
    assert not [e for e in events if isinstance(e, LLMCallErrorEvent)]  # the fallback hid it
    final = items[-1]
    assert isinstance(final, ResponseYield)
    assert final.response == "Hello from the secondary."


# -- closing -------------------------------------------------------------------------------------


class CloseFails(ScriptedLLM):
    """A model whose connections cannot be released (say, a broken transport)."""

    async def aclose(self) -> None:
        raise OSError("cannot close the transport")


async def test_a_failing_close_propagates_from_async_with(
    servers: tuple[MockLLMServer, MockLLMServer],
) -> None:
    healthy = OpenAICompatible(KEY, "m", servers[0].url)
    with pytest.raises(OSError, match="cannot close"):
        async with FallbackLLM([CloseFails(), healthy]):
            pass
    with pytest.raises(UserError, match="closed"):
        await healthy.complete(REQUEST)  # the other member was closed all the same


async def test_a_failing_close_does_not_mask_the_error_of_the_block(
    servers: tuple[MockLLMServer, MockLLMServer], caplog: pytest.LogCaptureFixture
) -> None:
    healthy = OpenAICompatible(KEY, "m", servers[0].url)
    with pytest.raises(LookupError, match="the block failed") as caught:
        async with FallbackLLM([CloseFails(), healthy]):
            raise LookupError("the block failed")
    assert any("aclose() also failed: OSError" in note for note in caught.value.__notes__)
    assert "cannot close the transport" in caplog.text
    with pytest.raises(UserError, match="closed"):
        await healthy.complete(REQUEST)
