"""Retries, Retry-After, deadlines and secrets of the HTTP layer, at the wire (mock LLM server)."""

from __future__ import annotations

import logging
import re
import socket
import traceback
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Literal

import anyio
import pytest

from simplellmfunc._messages import UserMessage
from simplellmfunc.exceptions import (
    AuthenticationError,
    NoUsableKeyError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    StreamError,
)
from simplellmfunc.providers import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    OpenAICompatible,
    RetryPolicy,
    TextDelta,
)
from simplellmfunc.providers._redact import fingerprint, redact
from simplellmfunc.testing import MockLLMServer, Reply

KEY = "sk-test-retry-SECRETSECRET-0001"
KEY_B = "sk-test-retry-SECRETSECRET-0002"
# Small delays keep the suite fast; the policy's logic is what is under test.
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
REQUEST = LLMRequest((UserMessage("hi"),))
RETRY_LOG = re.compile(r"retry (\d+)/(\d+) in ([0-9.]+)s")

Api = Literal["complete", "stream"]


def make_llm(
    server: MockLLMServer, keys: str | list[str] | None = KEY, **options: object
) -> OpenAICompatible:
    options.setdefault("retry_policy", FAST)
    return OpenAICompatible(keys, "gpt-4o-mini", server.url, **options)  # type: ignore[arg-type]


async def call(llm: OpenAICompatible, api: Api, request: LLMRequest = REQUEST) -> LLMResponse:
    """Run the request through ``api`` and return the final response."""
    if api == "complete":
        return await llm.complete(request)
    final = None
    async for event in llm.stream(request):
        if isinstance(event, FinishEvent):
            final = event.response
    assert final is not None
    return final


def logged_delays(caplog: pytest.LogCaptureFixture) -> list[float]:
    return [float(m.group(3)) for r in caplog.records if (m := RETRY_LOG.search(r.getMessage()))]


# -- which statuses are retried -------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
async def test_retryable_status_is_retried(
    mock_server: MockLLMServer, status: int, api: Api
) -> None:
    mock_server.script(Reply.error(status, "try again"), Reply.text("ok"))
    async with make_llm(mock_server) as llm:
        response = await call(llm, api)
    assert response.text == "ok"
    assert len(mock_server.requests) == 2
    assert mock_server.requests[0].json == mock_server.requests[1].json  # the same request


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, ProviderError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, ProviderError),
        (422, ProviderError),
    ],
)
@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_non_retryable_status_fails_at_once(
    mock_server: MockLLMServer, status: int, kind: type[ProviderError], api: Api
) -> None:
    mock_server.script(Reply.error(status, "you asked wrong"), Reply.text("never sent"))
    async with make_llm(mock_server) as llm:
        with pytest.raises(kind) as caught:
            await call(llm, api)
    error = caught.value
    assert len(mock_server.requests) == 1
    assert (error.status, error.attempts, error.retryable) == (status, 1, False)
    assert error.request_id == "req_mock_1"
    assert "you asked wrong" in str(error)
    assert "you asked wrong" in error.body_excerpt
    assert error.provider == "openai"


@pytest.mark.parametrize(
    ("status", "kind"), [(429, RateLimitError), (503, ProviderError), (529, ProviderError)]
)
async def test_spent_retries_raise_the_last_error(
    mock_server: MockLLMServer, status: int, kind: type[ProviderError]
) -> None:
    mock_server.default = Reply.error(status, "busy")
    async with make_llm(mock_server, keys=None) as llm:
        with pytest.raises(kind) as caught:
            await llm.complete(REQUEST)
    assert type(caught.value) is kind
    assert len(mock_server.requests) == 3  # 1 + max_retries
    assert (caught.value.attempts, caught.value.retryable) == (3, True)
    assert caught.value.request_id == "req_mock_3"


async def test_max_retries_zero_disables_retrying(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.error(503)
    async with make_llm(mock_server, retry_policy=RetryPolicy(max_retries=0)) as llm:
        with pytest.raises(ProviderError):
            await llm.complete(REQUEST)
    assert len(mock_server.requests) == 1


async def test_max_retries_shortcut_argument(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.error(500, headers={"retry-after-ms": "1"})
    async with OpenAICompatible(None, "m", mock_server.url, max_retries=4) as llm:
        with pytest.raises(ProviderError) as caught:
            await llm.complete(REQUEST)
    assert caught.value.attempts == 5
    assert len(mock_server.requests) == 5


# -- x-should-retry --------------------------------------------------------------------------


async def test_x_should_retry_false_wins_over_a_retryable_status(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(Reply.error(503, headers={"x-should-retry": "false"}), Reply.text("ok"))
    async with make_llm(mock_server) as llm:
        with pytest.raises(ProviderError) as caught:
            await llm.complete(REQUEST)
    assert caught.value.retryable is False
    assert len(mock_server.requests) == 1


async def test_x_should_retry_true_wins_over_a_final_status(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.error(400, headers={"x-should-retry": "true"}), Reply.text("ok"))
    async with make_llm(mock_server) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    assert len(mock_server.requests) == 2


# -- how long to wait ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "30"}, 0.03),
        ({"retry-after": "0.04"}, 0.04),
        ({"retry-after-ms": "20", "retry-after": "0.05"}, 0.02),  # the -ms header wins
        ({"retry-after-ms": "soon", "retry-after": "0.05"}, 0.05),  # unparseable: next one
    ],
)
async def test_retry_after_headers_are_honoured(
    mock_server: MockLLMServer,
    caplog: pytest.LogCaptureFixture,
    headers: dict[str, str],
    expected: float,
) -> None:
    caplog.set_level(logging.INFO, "simplellmfunc")
    mock_server.script(Reply.error(503, headers=headers), Reply.text("ok"))
    async with make_llm(mock_server, keys=None) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    assert logged_delays(caplog) == [pytest.approx(expected, abs=0.001)]


async def test_retry_after_http_date_is_honoured(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "simplellmfunc")
    when = datetime.now(UTC) + timedelta(seconds=2)
    mock_server.script(
        Reply.error(429, headers={"retry-after": format_datetime(when, usegmt=True)}),
        Reply.text("ok"),
    )
    async with make_llm(mock_server, keys=None) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    (delay,) = logged_delays(caplog)
    # HTTP dates have whole seconds: the wait is 1-2 s (what is left), not the 10 ms backoff.
    assert 0.5 < delay <= 2.0


@pytest.mark.parametrize(
    "headers",
    [
        {"retry-after": "3600"},  # beyond the cap
        {"retry-after-ms": "3600000"},
        {"retry-after": "-5"},
        {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"},  # in the past
        {"retry-after": "nan"},
        {"retry-after": "whenever"},
    ],
)
async def test_unusable_retry_after_falls_back_to_backoff(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture, headers: dict[str, str]
) -> None:
    caplog.set_level(logging.INFO, "simplellmfunc")
    mock_server.script(Reply.error(429, headers=headers), Reply.text("ok"))
    # One key: its cooldown must follow the capped wait too, or the retry would park on it.
    async with make_llm(mock_server, keys=KEY) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    (delay,) = logged_delays(caplog)
    assert 0.0075 <= delay <= 0.01  # initial_delay with up to 25 % jitter off
    assert len(mock_server.requests) == 2


def test_retry_policy_delay_math() -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=8.0, max_retry_after=60.0)
    for n, nominal in enumerate([0.5, 1.0, 2.0, 4.0, 8.0, 8.0]):
        delay = policy.delay(n, {})
        assert 0.75 * nominal <= delay <= nominal
    future = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert policy.delay(0, {"retry-after": future}) == pytest.approx(30, abs=1.5)
    zoneless = (datetime.now(UTC) + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S -0000")
    assert policy.delay(0, {"retry-after": zoneless}) == pytest.approx(30, abs=1.5)
    assert policy.delay(0, {"retry-after": "60"}) == 60
    assert policy.delay(0, {"retry-after": "61"}) <= 0.5
    assert policy.should_retry(None, {})  # connection errors
    assert not policy.should_retry(418, {})


async def test_sleep_that_would_pass_the_deadline_raises_the_real_error(
    mock_server: MockLLMServer,
) -> None:
    mock_server.default = Reply.error(503, "overloaded", headers={"retry-after": "30"})
    async with make_llm(mock_server, keys=None, retry_policy=RetryPolicy()) as llm:
        with pytest.raises(ProviderError) as caught:
            await llm.complete(LLMRequest(REQUEST.messages, timeout=2.0))
    assert type(caught.value) is ProviderError  # not a timeout: the 503 says more
    assert caught.value.status == 503
    assert len(mock_server.requests) == 1


async def test_slow_headers_hit_the_deadline(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("late", ttft=30))
    async with make_llm(mock_server) as llm:
        with pytest.raises(ProviderTimeoutError):
            await llm.complete(LLMRequest(REQUEST.messages, timeout=0.3))
    assert len(mock_server.requests) == 1


# -- never retry a stream that has started -----------------------------------------------------


async def test_no_retry_after_the_first_streamed_event(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("abcdefgh", chunks=4, disconnect_after=3)
    received: list[str] = []

    async def consume(llm: OpenAICompatible) -> None:
        async for event in llm.stream(REQUEST):
            if isinstance(event, TextDelta):
                received.append(event.text)

    async with make_llm(mock_server) as llm:
        with pytest.raises(StreamError) as caught:
            await consume(llm)
    assert received == ["ab", "cd"]  # role chunk, then two pieces, then the cut
    assert len(mock_server.requests) == 1
    assert caught.value.retryable  # a new call may work; this layer does not make it


async def test_error_event_after_200_is_not_retried(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("x", error_event={"message": "overloaded"})
    async with make_llm(mock_server) as llm:
        with pytest.raises(StreamError, match="overloaded"):
            await call(llm, "stream")
    assert len(mock_server.requests) == 1


# -- connection errors --------------------------------------------------------------------------


def _closed_port() -> int:
    """A loopback port with nothing listening (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_connection_refused_is_retried_then_raised(
    caplog: pytest.LogCaptureFixture, api: Api
) -> None:
    caplog.set_level(logging.INFO, "simplellmfunc")
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with OpenAICompatible(KEY, "m", url, retry_policy=FAST) as llm:
        with pytest.raises(ProviderConnectionError) as caught:
            await call(llm, api)
        assert llm.key_pool is not None
        assert [s["in_flight"] for s in llm.key_pool.status()] == [0]
    assert (caught.value.attempts, caught.value.retryable, caught.value.status) == (3, True, None)
    assert len(logged_delays(caplog)) == 2


# -- cancellation ------------------------------------------------------------------------------


async def test_cancel_during_retry_sleep(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.error(503, headers={"retry-after": "20"}), Reply.text("ok"))
    policy = RetryPolicy(max_retries=2)
    async with make_llm(mock_server, retry_policy=policy) as llm:
        with anyio.move_on_after(0.3) as scope:
            await llm.complete(REQUEST)
        assert scope.cancelled_caught
        assert llm.key_pool is not None
        assert [s["in_flight"] for s in llm.key_pool.status()] == [0]
        assert len(mock_server.requests) == 1
        # The interface is still healthy: the queued reply answers the next call.
        assert (await llm.complete(REQUEST)).text == "ok"


# -- secrets -----------------------------------------------------------------------------------


def _assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text
        assert secret[3:-4] not in text  # not even a large piece of it


async def test_keys_never_appear_in_logs_errors_reprs_or_headers(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    echo = f"Incorrect API key provided: {KEY}. Bearer {KEY_B} is also wrong."
    mock_server.script(
        Reply.error(429, headers={"retry-after-ms": "1"}),  # key A cools down: retry on B
        Reply.error(500, echo),  # B: retry (on A, the least recently used)
        Reply.error(401, echo),  # A is disabled: retry on B
        Reply.text("ok"),
        Reply.error(401, echo),  # the next call: B is disabled too
        Reply.text("x", chunks=3, disconnect_after=1),
    )
    errors: list[BaseException] = []
    policy = RetryPolicy(max_retries=3, initial_delay=0.01)
    async with make_llm(mock_server, keys=[KEY, KEY_B], retry_policy=policy) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
        with pytest.raises(AuthenticationError) as auth:
            await llm.complete(REQUEST)
        errors.append(auth.value)
        with pytest.raises(NoUsableKeyError) as none_left:
            await llm.complete(REQUEST)
        errors.append(none_left.value)
        assert llm.key_pool is not None
        texts = [repr(llm), repr(llm.key_pool), str(llm.key_pool.status())]
    async with make_llm(mock_server, keys=[KEY]) as llm:
        with pytest.raises(StreamError) as broken:
            await call(llm, "stream")
        errors.append(broken.value)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    async with OpenAICompatible([KEY], "m", url, retry_policy=FAST) as llm:
        with pytest.raises(ProviderConnectionError) as refused:
            await llm.complete(REQUEST)
        errors.append(refused.value)

    assert "HTTP 401: Incorrect API key" in str(errors[0])
    for error in errors:
        texts += [str(error), repr(error), "".join(traceback.format_exception(error))]
        if isinstance(error, ProviderError):
            texts.append(error.body_excerpt)
    texts.append(caplog.text)
    texts += [repr(r.headers) for r in mock_server.requests]
    assert any("HTTP Request" in r.getMessage() for r in caplog.records)  # httpx did log
    _assert_no_secret("\n".join(texts), KEY, KEY_B)


def test_fingerprints_are_short_and_redaction_catches_unknown_keys() -> None:
    assert fingerprint(KEY) == "…0001"
    assert fingerprint("short") == "…****"
    assert redact(f"key={KEY} other=sk-unknownkey12345678", [KEY]) == "key=…0001 other=…5678"
    assert redact("Authorization: Bearer abcdefgh12345678") == "Authorization: …5678"
    assert redact("no secrets here", [KEY]) == "no secrets here"
