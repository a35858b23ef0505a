"""Sessions, per-call keywords and cancellation: against MockLLMServer and real kernels."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, PyRepl, llm_chat, tool
from simplellmfunc.events import CustomEvent, EventYield, ToolCallEndEvent, ToolCallErrorEvent
from simplellmfunc.exceptions import (
    InputRefusedError,
    SessionError,
    ToolDefinitionError,
)
from simplellmfunc.runtime import InMemoryStore
from simplellmfunc.serving import SessionStore
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
LOOP = (
    "x = 41\nimport time\nfor i in range(300):\n    print('tick', i, flush=True)\n"
    "    time.sleep(0.05)"
)


def brain(request: RecordedRequest) -> Reply:
    """Run LOOP for "loop"; answer anything else (and every tool result) with text."""
    last = request.json["messages"][-1]
    if last["role"] == "user" and last["content"] == "loop":
        return Reply.tool_calls(ToolCallSpec("execute_code", {"code": LOOP}))
    return Reply.text(f"ok: {str(last['content'])[:80]}")


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    mock_server.default = brain
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as model:
        yield model


def make_agent(llm: OpenAICompatible) -> Any:
    @llm_chat(llm, stream=True, enable_event=True)
    async def agent(message: str, history: list | None = None):
        """Help."""

    return agent


async def test_disconnect_ends_the_turn_like_an_abort(llm: OpenAICompatible) -> None:
    """A consumer that leaves mid-cell: the turn is aborted, the session keeps a valid history
    whose tool result holds the cell's partial output, and the kernel keeps its variables."""
    async with SessionStore(make_agent(llm), pyrepl=True) as sessions:
        with anyio.fail_after(GUARD):
            async with aclosing(sessions.chat("u1", "loop")) as turn:
                async for item in turn:
                    event = item.event if isinstance(item, EventYield) else None
                    if isinstance(event, CustomEvent) and "tick 3" in event.data["text"]:
                        break  # the client disconnects
            session = sessions.get("u1")
            await session.wait_idle()
        history = session.history
        history_from_dicts(history)  # valid for the next turn
        tool = next(m for m in history if m["role"] == "tool")
        assert "tick 3" in tool["content"]
        assert "the client disconnected" in tool["content"]
        items = [i async for i in sessions.chat("u1", "again")]
        assert items[-1].response.startswith("ok: again")
        assert session.turns == 2
        assert "41" in str(await session.repl.execute("x"))  # variables survived the abort


async def test_cancel_on_disconnect_drops_the_turn(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("one two three four five six", chunks=6, chunk_delay=0.2))
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:
        store = InMemoryStore()
        async with SessionStore(make_agent(llm), store=store, on_disconnect="cancel") as sessions:
            async with aclosing(sessions.chat("u2", "hi")) as turn:
                async for _ in turn:
                    break
            session = sessions.get("u2")
            with anyio.fail_after(GUARD):
                await session.wait_idle()
            assert session.history == []
            assert session.turns == 0


async def test_limits_reclaim_and_persistence(llm: OpenAICompatible) -> None:
    store = InMemoryStore()
    async with SessionStore(make_agent(llm), store=store, max_sessions=1) as sessions:
        first = [i async for i in sessions.chat("a", "hello")]
        assert first[-1].response == "ok: hello"
        await sessions.open_session("b")  # one more than the limit: the idle "a" is reclaimed
        assert "a" not in sessions
        assert len(sessions) == 1
        reopened = await sessions.open_session("a")  # its history comes back from the store
        assert [m["role"] for m in reopened.history] == ["system", "user", "assistant"]
        assert await sessions.reclaim_idle(0) == ["a"]
        with pytest.raises(SessionError, match="invalid session id"):
            await sessions.open_session("../etc")
        with pytest.raises(SessionError, match="no open session"):
            sessions.abort("nobody")
    with pytest.raises(SessionError, match="not open"):
        await sessions.open_session("c")


async def test_a_busy_session_refuses_a_second_turn(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("slow reply here", chunks=3, chunk_delay=0.3))
    async with (
        OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm,
        SessionStore(make_agent(llm)) as sessions,
        aclosing(sessions.chat("u", "one")) as turn,
    ):
        await turn.__anext__()
        with pytest.raises(SessionError, match="already running a turn"):
            await sessions.chat("u", "two").__anext__()
        assert sessions.abort("u")


async def test_per_call_toolkit_and_session_id(mock_server: MockLLMServer) -> None:
    """``_toolkit`` adds tools to one call only; ``_session_id`` labels every event."""

    @tool
    def whoami() -> str:
        """Who is calling."""
        return "user-9"

    mock_server.script(Reply.tool_calls(ToolCallSpec("whoami", {})), Reply.text("You are user-9."))
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:
        agent = make_agent(llm)
        items = [i async for i in agent("who?", history=[], _toolkit=[whoami], _session_id="s9")]
        assert mock_server.requests[0].json["tools"][0]["function"]["name"] == "whoami"
        assert {i.origin.session_id for i in items if isinstance(i, EventYield)} == {"s9"}
        mock_server.script(Reply.text("no tools"))
        [_ async for _ in agent("again", history=[])]
        assert "tools" not in mock_server.requests[-1].json


async def test_a_cancelled_tool_call_gets_its_end_events(
    llm: OpenAICompatible, mock_server: MockLLMServer
) -> None:
    """An abort cancels a tool that does not stop by itself: it still gets error + end events."""

    @tool
    async def wait_forever() -> str:
        """Wait."""
        await anyio.sleep(60)
        return "never"

    @llm_chat(llm, toolkit=[wait_forever], enable_event=True)
    async def agent(message: str, history: list | None = None):
        """Help."""

    mock_server.script(Reply.tool_calls(ToolCallSpec("wait_forever", {})))
    abort = AbortSignal()
    events: list[Any] = []
    with anyio.fail_after(GUARD):
        async for item in agent("go", history=[], _abort_signal=abort):
            events.append(item)
            if isinstance(item, EventYield) and item.event.kind == "tool_call_start":
                abort.abort("stop")
    error = next(i.event for i in events[:-1] if isinstance(i.event, ToolCallErrorEvent))
    end = next(i.event for i in events[:-1] if isinstance(i.event, ToolCallEndEvent))
    assert error.error_type == "Cancelled"
    assert not end.success
    assert "cancelled" in end.result


async def test_error_messages(tmp_path: Path, llm: OpenAICompatible) -> None:
    with pytest.raises(ToolDefinitionError, match=r"repl\.toolset"):
        llm_chat(llm, toolkit=[PyRepl(tmp_path)])
    with pytest.raises(InputRefusedError, match="no input\\(\\) request has this id"):
        PyRepl(tmp_path).answer_input("nope", "x")


async def test_sandboxed_sessions_take_their_kernels_from_the_warm_pool(
    llm: OpenAICompatible,
) -> None:
    """The default (sandboxed) kernel of a session is a pooled one, not a cold start."""
    async with SessionStore(make_agent(llm), pyrepl=True, pool_size=1) as sessions:
        pool = sessions._pool  # the store's own warm pool
        assert pool is not None
        with anyio.fail_after(GUARD):
            await pool.wait_ready()
        warm = pool._ready[0].pid
        session = await sessions.open_session("alice")
        assert session.repl is not None
        with anyio.fail_after(GUARD):
            assert "2" in str(await session.repl.execute("1 + 1"))
        session_kernel = session.repl._kernel.session
        assert session_kernel is not None
        assert session_kernel.pid == warm
