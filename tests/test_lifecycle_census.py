"""The one async lifecycle, continued: no class in ``src`` writes its own ``__aenter__`` /
``__aexit__`` pair but those named below, and the copies converted last (the HTTP opener, the
channels, the mock LLM server) keep their behaviour on the shared base."""

from __future__ import annotations

import ast
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import simplellmfunc
from simplellmfunc import OpenAICompatible
from simplellmfunc._resource import AsyncResource
from simplellmfunc.exceptions import CapacityError, ChannelClosedError, SessionError, UserError
from simplellmfunc.providers._http import OpenResponse
from simplellmfunc.runtime.config import TurnResult
from simplellmfunc.runtime.multiagent import Channel, RedisChannel
from simplellmfunc.serving import ServedAgent, ServeLimits, SessionStore, TurnRequest
from simplellmfunc.testing import MockLLMServer, Reply

SRC = Path(simplellmfunc.__file__).parent

# Classes that still write the pair, each for a reason (docs/architecture.md, "Async resources"):
# a Run is a computation that is iterated, not a resource that is held. Named by class, not
# path: files move.
STILL_OWN = {"Run"}


def _own_pairs() -> set[str]:
    found = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name != "AsyncResource":
                methods = {n.name for n in node.body if isinstance(n, ast.AsyncFunctionDef)}
                if methods & {"__aenter__", "__aexit__"}:
                    found.add(f"{path.relative_to(SRC).as_posix()}:{node.name}")
    return found


def test_no_new_hand_written_lifecycle() -> None:
    assert {path for path in _own_pairs() if path.rpartition(":")[2] not in STILL_OWN} == set()
    for cls in (OpenResponse, Channel, RedisChannel, MockLLMServer, ServedAgent, SessionStore):
        assert issubclass(cls, AsyncResource), cls
        assert cls.__aenter__ is AsyncResource.__aenter__, cls
        assert cls.__aexit__ is AsyncResource.__aexit__, cls


async def test_channel_aclose_releases_and_close_only_ends_sending() -> None:
    channel: Channel[int] = Channel(int, capacity=2)
    await channel.send(1)
    await channel.close()  # no more sends; what was sent still arrives
    assert await channel.receive() == 1
    with pytest.raises(ChannelClosedError):
        await channel.send(2)
    async with Channel(int, capacity=2) as held:
        await held.send(3)
    with pytest.raises(ChannelClosedError):  # released: the unread value is gone
        await held.receive()
    await held.aclose()  # idempotent


async def _fail_in_callable_then_in_block(server: MockLLMServer) -> None:
    async with server, httpx.AsyncClient(base_url=server.url) as http:
        server.script(lambda request: Reply.text(str(1 / 0)))
        assert (await http.post("/chat/completions", json={"model": "m"})).status_code == 500
        raise LookupError("the test's own failure")


async def test_mock_server_reports_a_callable_error_on_any_exit() -> None:
    # The block's own error leaves unchanged and carries the callable's error as a note (it
    # used to be dropped); a plain aclose() raises it once.
    with pytest.raises(LookupError) as caught:
        await _fail_in_callable_then_in_block(MockLLMServer())
    assert any("ZeroDivisionError" in note for note in caught.value.__notes__)
    server = await MockLLMServer().start()
    async with httpx.AsyncClient(base_url=server.url) as http:
        server.script(lambda request: Reply.text(str(1 / 0)))
        await http.post("/chat/completions", json={"model": "m"})
    with pytest.raises(ZeroDivisionError):
        await server.aclose()
    await server.aclose()  # once


async def test_the_http_opener_is_a_resource_around_its_response() -> None:
    async with (
        MockLLMServer(default=Reply.text("hi")) as server,
        OpenAICompatible("sk-test-123456789", "m", server.url) as llm,
    ):
        transport = llm._http
        body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
        opener = transport.open("/chat/completions", body, transport.deadline(5))
        with pytest.raises(UserError):
            _ = opener.response  # not sent yet
        async with opener:
            assert opener.response.status_code == 200
            data = await transport.read_json(opener.response, transport.deadline(5))
            assert data["choices"][0]["message"]["content"] == "hi"
        with pytest.raises(UserError):
            _ = opener.response  # closed: no response to hand out


async def _echo(message: str, history: list[Any] | None = None, **_: Any) -> AsyncIterator[str]:
    yield message


async def test_served_agent_and_session_store_on_the_one_lifecycle() -> None:
    # A served agent owns its store: open() opens it, aclose() stops the turns and closes it.
    own = ServedAgent(_echo, limits=ServeLimits(max_turns=1))
    async with own:
        assert own.is_open
        assert own.sessions.is_open
        with pytest.raises(UserError):
            await own.open()
        items = [item async for item in own.turn(TurnRequest("hi", "a"))]
        assert items[0] == "hi"  # a plain function's own items pass the door
        assert isinstance(items[-1], TurnResult)
    assert not own.is_open
    assert not own.sessions.is_open
    await own.aclose()  # idempotent
    async with own:  # and it opens again
        assert own.is_open

    # Around a store its caller holds: closing the served agent only stops its turns.
    store = SessionStore(_echo)
    async with store:
        with pytest.raises(SessionError):
            await store.open()
        served = ServedAgent.around(store, limits=ServeLimits(max_turns=1))
        assert served.is_open  # admits while the store is open
        await served.aclose()
        assert store.is_open
        assert not served.is_open
        with pytest.raises(CapacityError) as refused:
            await anext(served.turn(TurnRequest("hi", "a")))
        assert refused.value.limit == "closing"
        await served.open()  # admits again
        again = [i async for i in served.turn(TurnRequest("again", "a"))]
        assert again[0] == "again"
    assert not store.is_open
    assert not served.is_open
    await store.aclose()  # idempotent
