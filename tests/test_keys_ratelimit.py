"""APIKeyPool and TokenBucket: on their own and through OpenAICompatible at the wire."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
import pytest

from conftest import settle
from simplellmfunc._messages import UserMessage
from simplellmfunc.exceptions import (
    AuthenticationError,
    ConfigError,
    NoUsableKeyError,
    ProviderTimeoutError,
)
from simplellmfunc.providers import (
    APIKeyPool,
    LLMRequest,
    OpenAICompatible,
    RetryPolicy,
    TokenBucket,
)
from simplellmfunc.testing import MockLLMServer, Reply, key_fingerprint

KEYS = ["sk-test-pool-key-A-0000000001", "sk-test-pool-key-B-0000000002", "sk-test-pool-C-03"]
A, B, C = KEYS
REQUEST = LLMRequest((UserMessage("hi"),))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)


def used_keys(server: MockLLMServer) -> list[str]:
    """Which key each recorded request used (the server records fingerprints only)."""
    names = {f"Bearer {key_fingerprint(k)}": k for k in KEYS}
    return [names[r.headers["authorization"]] for r in server.requests]


def in_flight(pool: APIKeyPool | None) -> list[object]:
    assert pool is not None
    return [s["in_flight"] for s in pool.status()]


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record every ``anyio.sleep`` duration (the real sleep still runs): waits are observable
    without timing the test, and a busy-polling wait would show up as many short sleeps."""
    recorded: list[float] = []
    real_sleep: Callable[[float], Awaitable[None]] = anyio.sleep

    async def recording_sleep(delay: float) -> None:
        recorded.append(delay)
        await real_sleep(delay)

    monkeypatch.setattr(anyio, "sleep", recording_sleep)
    return recorded


# -- APIKeyPool on its own ---------------------------------------------------------------------


def test_pool_needs_keys_and_drops_duplicates() -> None:
    with pytest.raises(ConfigError):
        APIKeyPool([])
    with pytest.raises(ConfigError):
        APIKeyPool(["sk-good-key-123", ""])
    pool = APIKeyPool([A, B, A])
    assert pool.keys == (A, B)
    assert len(APIKeyPool(A)) == 1


def test_pool_repr_and_status_show_fingerprints_only() -> None:
    pool = APIKeyPool(KEYS, "openai")
    text = repr(pool) + str(pool.status())
    for key in KEYS:
        assert key not in text
        assert key[-4:] in text


async def test_least_loaded_then_least_recently_used() -> None:
    pool = APIKeyPool(KEYS)
    first = [await pool.acquire() for _ in range(4)]
    assert first == [A, B, C, A]  # spread while all are busy
    for key in first:
        pool.release(key)
    # All idle again: the one used least recently goes first, so sequential calls rotate.
    sequential = []
    for _ in range(3):
        key = await pool.acquire()
        sequential.append(key)
        pool.release(key)
    assert sequential == [B, C, A]


async def test_two_pools_never_share_state() -> None:
    one, two = APIKeyPool([A, B], "p"), APIKeyPool([A, B], "p")
    one.disable(A, "HTTP 401")
    one.cool_down(B, 60)
    assert await two.acquire() == A
    assert two.status()[0]["disabled"] is None


async def test_pool_waits_for_the_first_cooldown_to_end(sleeps: list[float]) -> None:
    pool = APIKeyPool([A, B])
    pool.cool_down(A, 0.2)
    pool.cool_down(B, 0.05)
    assert await pool.acquire() == B
    assert len(sleeps) == 1  # one sleep until B is back, no polling
    assert 0.03 < sleeps[0] <= 0.05


async def test_pool_with_every_key_disabled_fails_clearly() -> None:
    pool = APIKeyPool([A, B], "openai")
    pool.disable(A, "HTTP 401")
    pool.disable(B, "HTTP 403")
    assert not pool.has_live_key()
    with pytest.raises(NoUsableKeyError) as caught:
        await pool.acquire()
    message = str(caught.value)
    assert "HTTP 401" in message
    assert "HTTP 403" in message
    assert A not in message
    assert B not in message


# -- APIKeyPool at the wire --------------------------------------------------------------------


async def test_429_cools_the_key_and_the_next_call_uses_another(
    mock_server: MockLLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "simplellmfunc")
    mock_server.script(
        Reply.error(429, headers={"retry-after": "30"}), Reply.text("one"), Reply.text("two")
    )
    async with OpenAICompatible([A, B], "m", mock_server.url, retry_policy=FAST) as llm:
        assert (await llm.complete(REQUEST)).text == "one"
        assert (await llm.complete(REQUEST)).text == "two"
        pool = llm.key_pool
        assert pool is not None
        status = pool.status()
    # Key A's 429 sent the retry to B at once (no 30 s wait), and A stays out of use.
    assert used_keys(mock_server) == [A, B, B]
    assert [r.getMessage().rsplit(" in ", 1)[1] for r in caplog.records] == ["0.000s"]
    assert 25 < float(status[0]["cooling_for_s"]) <= 30  # type: ignore[arg-type]
    assert status[1]["cooling_for_s"] == 0.0
    assert in_flight(pool) == [0, 0]


async def test_429_with_one_key_waits_then_reuses_it(
    mock_server: MockLLMServer, sleeps: list[float]
) -> None:
    mock_server.script(Reply.error(429, headers={"retry-after-ms": "40"}), Reply.text("ok"))
    async with OpenAICompatible(A, "m", mock_server.url, retry_policy=FAST) as llm:
        assert (await llm.complete(REQUEST)).text == "ok"
    assert used_keys(mock_server) == [A, A]
    assert sleeps[0] == pytest.approx(0.04)


async def test_a_call_waiting_to_retry_holds_no_key(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.error(503, headers={"retry-after": "20"}))
    policy = RetryPolicy(max_retries=1)
    llm = OpenAICompatible([A, B], "m", mock_server.url, retry_policy=policy)
    async with llm, anyio.create_task_group() as group:
        group.start_soon(llm.complete, REQUEST)
        assert await settle(lambda: len(mock_server.requests) == 1)
        # Once the failure is read the call sleeps 20 s before its retry, holding no key.
        assert await settle(lambda: in_flight(llm.key_pool) == [0, 0])
        group.cancel_scope.cancel()
    assert len(mock_server.requests) == 1


@pytest.mark.parametrize("status", [401, 403])
async def test_rejected_key_is_disabled_with_its_reason(
    mock_server: MockLLMServer, status: int
) -> None:
    mock_server.script(
        Reply.error(status, "bad key"),  # A
        Reply.text("one"),  # retried on B at once
        Reply.text("two"),  # B again: A is out
        Reply.error(status, "bad key"),  # B
    )
    async with OpenAICompatible([A, B], "m", mock_server.url, retry_policy=FAST) as llm:
        assert (await llm.complete(REQUEST)).text == "one"
        assert (await llm.complete(REQUEST)).text == "two"
        pool = llm.key_pool
        assert pool is not None
        assert pool.status()[0]["disabled"] == f"HTTP {status}"
        assert pool.status()[1]["disabled"] is None
        with pytest.raises(AuthenticationError) as caught:
            await llm.complete(REQUEST)
        assert caught.value.retryable is False
        with pytest.raises(NoUsableKeyError):
            await llm.complete(REQUEST)  # nothing is sent
    assert used_keys(mock_server) == [A, B, B, B]
    assert in_flight(pool) == [0, 0]


async def test_concurrent_calls_spread_over_the_least_loaded_keys(
    mock_server: MockLLMServer,
) -> None:
    # Each reply waits for its headers, so all six calls are in flight together.
    mock_server.default = Reply.text("ok", ttft=0.1)
    async with OpenAICompatible(KEYS, "m", mock_server.url, retry_policy=FAST) as llm:
        async with anyio.create_task_group() as group:
            for _ in range(6):
                group.start_soon(llm.complete, REQUEST)
        pool = llm.key_pool
    assert sorted(used_keys(mock_server)) == sorted(KEYS * 2)
    assert in_flight(pool) == [0, 0, 0]


# -- TokenBucket on its own --------------------------------------------------------------------


def test_bucket_rejects_bad_settings() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)
    with pytest.raises(ValueError):
        TokenBucket(1, 0)
    assert repr(TokenBucket(5, 2.5)) == "TokenBucket(capacity=5, refill_rate=2.5)"


async def test_bucket_cannot_serve_more_than_its_capacity() -> None:
    with pytest.raises(ValueError):
        await TokenBucket(2, 1).acquire(3)


async def test_bucket_serves_its_capacity_at_once(sleeps: list[float]) -> None:
    bucket = TokenBucket(3, 1)
    for _ in range(3):
        await bucket.acquire()
    assert sleeps == []
    assert not bucket.try_acquire()


async def test_bucket_waits_one_sleep_of_the_right_length(sleeps: list[float]) -> None:
    bucket = TokenBucket(1, 20)  # a token every 50 ms
    await bucket.acquire()
    await bucket.acquire()
    # One sleep of about 50 ms; the event loop may wake a hair early, which costs at most one
    # more, tiny sleep (never a polling loop).
    assert 1 <= len(sleeps) <= 2
    assert 0.02 < sleeps[0] <= 0.05  # 50 ms less the (tiny) time since the first token
    assert sum(sleeps) <= 0.05 + 0.01


async def test_bucket_serves_waiters_in_arrival_order(sleeps: list[float]) -> None:
    bucket = TokenBucket(1, 50)
    await bucket.acquire()
    served: list[int] = []

    async def waiter(n: int) -> None:
        await bucket.acquire()
        served.append(n)

    async with anyio.create_task_group() as group:
        for n in range(4):
            group.start_soon(waiter, n)
            await anyio.lowlevel.checkpoint()  # start them in order
    assert served == [0, 1, 2, 3]
    assert len(sleeps) <= 8  # about one sleep per token


async def test_cancelled_waiter_takes_nothing_and_blocks_no_one(sleeps: list[float]) -> None:
    bucket = TokenBucket(1, 10)  # a token every 100 ms
    await bucket.acquire()
    with anyio.move_on_after(0.02) as scope:
        await bucket.acquire()
    assert scope.cancelled_caught
    # The cancelled waiter held the queue's head; the next waiter must not inherit a stuck lock.
    with anyio.fail_after(5):
        await bucket.acquire()
    assert bucket.available < 1


# -- TokenBucket at the wire -------------------------------------------------------------------


async def test_interface_rate_limit_spaces_the_calls(
    mock_server: MockLLMServer, sleeps: list[float]
) -> None:
    mock_server.default = Reply.text("ok")
    async with OpenAICompatible(
        A, "m", mock_server.url, rate_limit_capacity=1, rate_limit_refill_rate=5
    ) as llm:
        await llm.complete(REQUEST)
        await llm.complete(REQUEST)
    assert len(mock_server.requests) == 2
    # The second call waited for the token due 200 ms after the first: one sleep for what was
    # left of that (however long the first call took), not a polling loop.
    assert 1 <= len(sleeps) <= 2
    assert 0 < sleeps[0] <= 0.2


async def test_rate_limit_wait_respects_the_call_deadline(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok")
    bucket = TokenBucket(1, 0.01)  # the next token is 100 s away
    async with OpenAICompatible(A, "m", mock_server.url, rate_limit=bucket) as llm:
        await llm.complete(REQUEST)
        with pytest.raises(ProviderTimeoutError):
            await llm.complete(LLMRequest(REQUEST.messages, timeout=0.2))
        assert in_flight(llm.key_pool) == [0]
    assert len(mock_server.requests) == 1


async def test_shared_bucket_limits_two_interfaces_together(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok")
    bucket = TokenBucket(2, 0.01)
    async with (
        OpenAICompatible(A, "m", mock_server.url, rate_limit=bucket) as one,
        OpenAICompatible(B, "m", mock_server.url, rate_limit=bucket) as two,
    ):
        await one.complete(REQUEST)
        await two.complete(REQUEST)
        with anyio.move_on_after(0.1) as scope:
            await one.complete(REQUEST)
    assert scope.cancelled_caught  # cancelled while waiting for a token: nothing sent
    assert len(mock_server.requests) == 2
