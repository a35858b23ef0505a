"""A tool that raises a stray ``CancelledError`` (it awaited a future something else cancelled).

That cancellation is not the run's: it is a tool failure the model sees, its siblings finish, and
the run ends with an answer and a valid history in every mode.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.engine import RunHook, RunView
from simplellmfunc.events import EventYield, ReactEndEvent, ResponseYield
from simplellmfunc.exceptions import RunError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import ContextMutation, history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


@tool
async def flaky() -> str:
    """Wait for a result that someone else cancels."""
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future  # raises CancelledError: not a cancellation of this task


@tool
async def healthy() -> str:
    """Take a moment, then succeed."""
    await anyio.sleep(0.05)
    return "fine"


def _script(server: MockLLMServer) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("flaky", {}, id="c1"), ToolCallSpec("healthy", {}, id="c2")),
        Reply.text("Handled it."),
    )


def _tool_results(server: MockLLMServer) -> dict[str, str]:
    sent = server.requests[1].json["messages"]
    return {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}


def _check_results(server: MockLLMServer) -> None:
    results = _tool_results(server)
    assert "CancelledError" in results["c1"]
    assert results["c2"] == "fine"  # the sibling was not cancelled


@pytest.mark.parametrize("mode", ["plain", "stream", "events"])
async def test_llm_chat_turns_a_stray_cancellation_into_a_tool_failure(
    mock_server: MockLLMServer, llm: OpenAICompatible, mode: str
) -> None:
    _script(mock_server)

    @llm_chat(llm, toolkit=[flaky, healthy], stream=mode == "stream", enable_event=mode == "events")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[])) as items:
            outputs = [item async for item in items]
    _check_results(mock_server)
    if mode == "events":
        ends = [o.event for o in outputs if isinstance(o, EventYield)]
        assert isinstance(ends[-1], ReactEndEvent)
        assert ends[-1].terminated_by == "answer"
        assert isinstance(outputs[-1], ResponseYield)
        history = outputs[-1].messages
    else:
        history = outputs[-1][1]
    assert history[-1] == {"role": "assistant", "content": "Handled it."}
    history_from_dicts(history)  # valid: every tool call answered


async def test_llm_function_turns_a_stray_cancellation_into_a_tool_failure(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    _script(mock_server)

    @llm_function(llm, toolkit=[flaky, healthy])
    async def f(question: str) -> str:
        """Answer."""

    with anyio.fail_after(GUARD):
        assert await f("go") == "Handled it."
    _check_results(mock_server)


async def test_a_real_cancellation_still_cancels_the_run(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("healthy", {}, id="c1")))

    @llm_function(llm, toolkit=[healthy])
    async def f(question: str) -> str:
        """Answer."""

    with anyio.move_on_after(0.02) as scope:
        await f("go")
    assert scope.cancelled_caught


class _StrayHook(RunHook):
    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        await future  # a stray cancellation outside any tool
        return ()


@pytest.mark.parametrize("mode", ["stream", "events"])
async def test_a_live_run_never_ends_silently(llm: OpenAICompatible, mode: str) -> None:
    @llm_chat(llm, stream=mode == "stream", enable_event=mode == "events", hooks=[_StrayHook()])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    async def drain() -> None:
        async with aclosing(agent("go", history=[])) as items:
            async for _ in items:
                pass

    with anyio.fail_after(GUARD), pytest.raises(RunError, match="cancelled by something other"):
        await drain()
