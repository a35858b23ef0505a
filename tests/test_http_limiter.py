"""The connection limiter in front of httpx: ``max_connections`` requests in flight, the others
wait in the transport (within their deadline), and every way a call ends gives its slot back."""

from __future__ import annotations

import gc
from contextlib import aclosing

import anyio
import httpx
import pytest

from simplellmfunc._messages import UserMessage
from simplellmfunc.exceptions import ProviderError, ProviderTimeoutError
from simplellmfunc.providers import LLMRequest, OpenAICompatible, TextDelta
from simplellmfunc.testing import MockLLMServer, Reply

REQUEST = LLMRequest((UserMessage("hi"),))


def make_llm(server: MockLLMServer, connections: int) -> OpenAICompatible:
    return OpenAICompatible(
        "sk-limiter", "m", server.url, max_retries=0, max_connections=connections
    )


async def requests_seen(server: MockLLMServer, count: int) -> None:
    """Until the server has received ``count`` requests (headers not yet answered)."""
    with anyio.fail_after(5):
        while len(server.requests) < count:  # noqa: ASYNC110 - the server offers no event
            await anyio.sleep(0.002)


async def test_no_more_than_max_connections_requests_reach_the_server(
    mock_server: MockLLMServer,
) -> None:
    mock_server.default = Reply.text("ok", ttft=0.1)
    texts: list[str | None] = []

    async def one(llm: OpenAICompatible) -> None:
        texts.append((await llm.complete(REQUEST)).text)

    async with make_llm(mock_server, 2) as llm, anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(one, llm)
        await requests_seen(mock_server, 2)
        await anyio.sleep(0.05)  # half a reply: nobody else may have got in
        assert len(mock_server.requests) == 2
        slots = llm._http._slots
        assert slots is not None
        assert slots.statistics().tasks_waiting == 4  # waiting here, not in httpx's pool
        # A queued call holds no exception (nor its traceback and frames): about 1.5 KB each
        # when it waited inside ``except WouldBlock``.
        assert not [o for o in gc.get_objects() if isinstance(o, anyio.WouldBlock)]
    assert texts == ["ok"] * 6
    assert slots.value == 2  # every slot given back


async def test_waiting_for_a_connection_ends_at_the_deadline(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("slow", ttft=0.5), Reply.text("fast"))
    async with make_llm(mock_server, 1) as llm, anyio.create_task_group() as group:
        group.start_soon(llm.complete, REQUEST)
        await requests_seen(mock_server, 1)
        with pytest.raises(ProviderTimeoutError, match="waiting for a connection"):
            await llm.complete(LLMRequest(REQUEST.messages, timeout=0.1))
    assert len(mock_server.requests) == 1  # the second call never reached the server


async def test_every_ending_gives_the_slot_back(mock_server: MockLLMServer) -> None:
    """One connection: a broken-off stream, an HTTP error, a call cancelled while it waits
    and a finished call each release it, so the next call still gets through."""
    mock_server.script(
        Reply.text("abcdefgh", chunks=4),
        Reply.error(400, "bad request"),
        Reply.text("slow", ttft=0.3),
        Reply.text("last"),
    )
    async with make_llm(mock_server, 1) as llm:
        async with aclosing(llm.stream(REQUEST)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        with pytest.raises(ProviderError, match="HTTP 400"):
            await llm.complete(REQUEST)
        async with anyio.create_task_group() as group:
            group.start_soon(llm.complete, REQUEST)  # holds the one connection for 0.3 s
            await requests_seen(mock_server, 3)
            with anyio.move_on_after(0.05):
                await llm.complete(REQUEST)  # waits for it, then is cancelled
        response = await llm.complete(LLMRequest(REQUEST.messages, timeout=5))
        assert response.text == "last"
        assert llm._http._slots is not None
        assert llm._http._slots.value == 1


def pools(llm: OpenAICompatible) -> list[int]:
    """Connections held by each httpx client the transport owns (whatever holds them)."""
    clients: list[httpx.AsyncClient] = []
    for value in vars(llm._http).values():
        for item in value if isinstance(value, tuple | list) else (value,):
            if isinstance(item, httpx.AsyncClient) and item not in clients:
                clients.append(item)
    return [len(client._transport._pool.connections) for client in clients]  # type: ignore[attr-defined]


async def test_the_connections_are_spread_over_pools_of_at_most_ten(
    mock_server: MockLLMServer,
) -> None:
    """httpcore walks a pool's connections (and, per idle one, all of them again) whenever a
    request starts or ends: 25 connections make three pools, none queueing a request."""
    mock_server.default = Reply.text("ok", ttft=0.1)
    async with make_llm(mock_server, 25) as llm:
        assert pools(llm) == [0]  # the others are made when first needed
        async with anyio.create_task_group() as group:
            for _ in range(25):
                group.start_soon(llm.complete, REQUEST)
            await requests_seen(mock_server, 25)  # all in flight at once: none queued
        assert sorted(pools(llm)) == [8, 8, 9]
        mock_server.default = Reply.text("ok")
        for _ in range(5):  # one at a time: the connection used last serves the next
            await llm.complete(REQUEST)
        assert sum(pools(llm)) == 25  # kept alive, no new one opened


async def test_a_shared_client_is_one_pool(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok", ttft=0.05)
    async with httpx.AsyncClient() as http:
        llm = OpenAICompatible("sk-limiter", "m", mock_server.url, max_retries=0,
                               max_connections=12, http_client=http)  # fmt: skip
        async with llm, anyio.create_task_group() as group:
            for _ in range(12):
                group.start_soon(llm.complete, REQUEST)
        assert len(http._transport._pool.connections) == 12  # type: ignore[attr-defined]
        assert not http.is_closed
