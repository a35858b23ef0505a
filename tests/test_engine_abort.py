"""Abort in every phase: streaming call, non-streaming call, tool batch; histories stay valid."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.exceptions import AbortedError
from simplellmfunc.hooks import (
    EventYield,
    LLMCallStartEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ResponseYield,
    ToolCallEndEvent,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts, validate_history

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
def server(mock_server: MockLLMServer) -> MockLLMServer:
    return mock_server  # from conftest.py, like the leak check run around every test


@pytest.fixture
async def llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", server.url) as model:
        yield model


def check_end(items: list[Any], reason: str) -> tuple[ReactEndEvent, list[dict[str, Any]]]:
    """The run ended aborted, and both the event's and the response's history are valid."""
    response = items[-1]
    assert isinstance(response, ResponseYield)
    end = items[-2].event
    assert isinstance(end, ReactEndEvent)
    assert end.aborted
    assert (end.terminated_by, end.abort_reason) == ("aborted", reason)
    history_from_dicts(end.final_messages)
    history_from_dicts(response.messages)
    assert list(end.final_messages) == response.messages
    return end, response.messages


async def consume(agent: Any, abort: AbortSignal, when: Any, reason: str) -> list[Any]:
    """Run ``agent`` with events, aborting when ``when(item)`` first holds."""
    items: list[Any] = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[], _abort_signal=abort)) as stream:
            async for item in stream:
                items.append(item)
                if isinstance(item, EventYield) and when(item.event):
                    abort.abort(reason)
    return items


async def test_abort_during_a_streaming_call(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(Reply.text("unused", drip=0.005))
    abort = AbortSignal()
    chunks = 0

    def third_chunk(event: Any) -> bool:
        nonlocal chunks
        chunks += isinstance(event, LLMChunkArriveEvent)
        return chunks == 3

    @llm_chat(llm, stream=True, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await consume(agent, abort, third_chunk, "user pressed stop")
    _, history = check_end(items, "user pressed stop")
    last = history[-1]
    assert last["role"] == "assistant"
    assert last["truncated"] is True
    assert last["abort_reason"] == "user pressed stop"
    assert last["content"].startswith("...")  # what arrived before the abort is kept
    assert not any(
        isinstance(i.event, ReactEndEvent) for i in items[:-2] if isinstance(i, EventYield)
    )


async def test_abort_during_a_non_streaming_call(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("too late", ttft=30))
    abort = AbortSignal()

    @llm_chat(llm, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await consume(agent, abort, lambda e: isinstance(e, LLMCallStartEvent), "timeout")
    _, history = check_end(items, "timeout")
    assert history[-1] == {
        "role": "assistant",
        "content": "",
        "truncated": True,
        "abort_reason": "timeout",
    }


async def test_abort_during_a_tool_batch(server: MockLLMServer, llm: OpenAICompatible) -> None:
    @tool
    async def slow() -> str:
        """Never finishes."""
        await anyio.sleep_forever()
        return "never"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        return "quick result"

    server.script(
        Reply.tool_calls(ToolCallSpec("slow", id="c1"), ToolCallSpec("quick", id="c2")),
        Reply.text("unused"),
    )
    abort = AbortSignal()

    @llm_chat(llm, toolkit=[slow, quick], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    def quick_done(event: Any) -> bool:
        return isinstance(event, ToolCallEndEvent) and event.tool_call_id == "c2"

    items = await consume(agent, abort, quick_done, "enough")
    end, history = check_end(items, "enough")
    results = {m["tool_call_id"]: m for m in history if m["role"] == "tool"}
    assert results["c2"]["content"] == "quick result"
    cancelled = results["c1"]
    assert cancelled["cancelled"] is True
    assert cancelled["abort_reason"] == "enough"
    assert "slow" in cancelled["content"]
    assert "cancelled" in cancelled["content"]
    assert history[-1]["role"] == "tool"  # no further LLM call
    assert len(server.requests) == 1
    assert end.tool_calls == 2


async def test_abort_of_a_sync_tool_does_not_wait_for_its_thread(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    started, release = threading.Event(), threading.Event()

    @tool
    def blocking() -> str:
        """Blocks its thread until released."""
        started.set()
        release.wait(GUARD / 4)
        return "late"

    server.script(Reply.tool_calls(ToolCallSpec("blocking", id="c1")), Reply.text("unused"))
    abort = AbortSignal()

    @llm_chat(llm, toolkit=[blocking], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    async def abort_once_blocked() -> None:
        await anyio.to_thread.run_sync(started.wait, GUARD)
        abort.abort("stop now")

    try:
        with anyio.fail_after(GUARD / 10):
            async with anyio.create_task_group() as group:
                group.start_soon(abort_once_blocked)
                async with aclosing(agent("go", history=[], _abort_signal=abort)) as stream:
                    items = [item async for item in stream]
        assert not release.is_set()  # the run ended while the thread was still blocked
    finally:
        release.set()
    _, history = check_end(items, "stop now")
    cancelled = history[-1]
    assert cancelled["cancelled"] is True
    assert "thread" in cancelled["content"]


async def test_abort_before_the_run_starts(server: MockLLMServer, llm: OpenAICompatible) -> None:
    abort = AbortSignal()
    abort.abort("never mind")

    @llm_chat(llm, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await consume(agent, abort, lambda e: False, "unused")
    _, history = check_end(items, "never mind")
    assert server.requests == []
    assert history[-1] == {"role": "user", "content": "go"}


async def test_abort_plain_stream_mode_yields_a_valid_history(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("unused", drip=0.005))
    abort = AbortSignal()

    @llm_chat(llm, stream=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    outputs = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[], _abort_signal=abort)) as stream:
            async for text, history in stream:
                outputs.append((text, history))
                if text:
                    abort.abort("stop")
    text, history = outputs[-1]
    history_from_dicts(history)
    assert history[-1]["truncated"] is True


async def test_llm_function_abort_raises_aborted_error(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    arrived = anyio.Event()

    def slow_reply(request: Any) -> Reply:
        arrived.set()
        return Reply.text("42", ttft=30)

    server.script(slow_reply)
    abort = AbortSignal()

    @llm_function(llm)
    async def answer(question: str) -> int:
        """Answer."""

    async def stop_soon() -> None:
        await arrived.wait()
        abort.abort("cancelled by test")

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(stop_soon)
            with pytest.raises(AbortedError) as caught:
                await answer("q", _abort_signal=abort)
    assert caught.value.reason == "cancelled by test"


async def test_llm_function_event_mode_abort_raises_after_the_end_event(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("42", ttft=30))
    abort = AbortSignal()

    @llm_function(llm, enable_event=True)
    async def answer(question: str) -> int:
        """Answer."""

    items: list[Any] = []

    async def run() -> None:
        async with aclosing(answer("q", _abort_signal=abort)) as stream:
            async for item in stream:
                items.append(item)
                if isinstance(item.event, LLMCallStartEvent):
                    abort.abort("stop")

    with anyio.fail_after(GUARD), pytest.raises(AbortedError):
        await run()
    end = items[-1].event
    assert isinstance(end, ReactEndEvent)
    assert end.aborted
    validate_history(history_from_dicts(end.final_messages))


async def test_abort_in_plain_mode_from_another_task(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    started = anyio.Event()

    @tool
    async def slow() -> str:
        """Never finishes."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    server.script(Reply.tool_calls(ToolCallSpec("slow", id="c1"), text="Working on it."))
    abort = AbortSignal()

    @llm_chat(llm, toolkit=[slow])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    async def stop() -> None:
        await started.wait()
        abort.abort("stop")

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(stop)
            async with aclosing(agent("go", history=[], _abort_signal=abort)) as stream:
                outputs = [item async for item in stream]
    assert [text for text, _ in outputs] == ["Working on it.", ""]
    history = outputs[-1][1]
    history_from_dicts(history)
    assert history[-1]["cancelled"] is True
