"""Streamed tool calls that share one id at different indexes (servers that reuse ids).

Two calls, both id ``dup``, at indexes 0 and 1: the assembler routes by index when the server
gives one, so the stream assembles the same two calls as the non-streamed reply; the engine then
makes the ids unique in the transcript. Checked on every HTTP provider, streamed or not, and
through ``@llm_chat`` (plain, ``stream=True``, ``enable_event=True``) and ``@llm_function``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import llm_chat, llm_function, tool
from simplellmfunc.events import EventYield, ReactEndEvent, ResponseYield
from simplellmfunc.providers import (
    AnthropicCompatible,
    FinishEvent,
    HTTPInterface,
    LLMRequest,
    LLMResponse,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    ToolCallDelta,
)
from simplellmfunc.testing import DeltaShape, MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import UserMessage, history_from_dicts, validate_history

KEY = "sk-dup-test-0123456789"
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed
PROVIDERS: dict[str, type[HTTPInterface]] = {
    "chat": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}
CALLS = (ToolCallSpec("add", {"a": 1, "b": 2}, id="dup"), ToolCallSpec("mul", {"a": 3}, id="dup"))


@pytest.fixture(params=sorted(PROVIDERS))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def llm(api: str, mock_server: MockLLMServer) -> AsyncIterator[HTTPInterface]:
    async with PROVIDERS[api](KEY, "mock-model", mock_server.url) as llm:
        yield llm


async def _stream(llm: HTTPInterface) -> tuple[LLMResponse, list[ToolCallDelta]]:
    deltas: list[ToolCallDelta] = []
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(LLMRequest((UserMessage("go"),)))) as events:
            async for event in events:
                if isinstance(event, ToolCallDelta):
                    deltas.append(event)
                elif isinstance(event, FinishEvent):
                    return event.response, deltas
    raise AssertionError("no FinishEvent")


def _assert_two_calls(response: LLMResponse) -> None:
    calls = [(c.id, c.name, json.loads(c.arguments)) for c in response.message.tool_calls]
    assert calls == [("dup", "add", {"a": 1, "b": 2}), ("dup", "mul", {"a": 3})]


@pytest.mark.parametrize("shape", ["standard", "repeat_id_name"])
@pytest.mark.parametrize("chunks", [1, 3])
async def test_streamed_calls_with_one_id_at_two_indexes(
    mock_server: MockLLMServer, llm: HTTPInterface, shape: DeltaShape, chunks: int
) -> None:
    mock_server.script(Reply.tool_calls(*CALLS, chunks=chunks, delta_shape=shape))
    response, deltas = await _stream(llm)
    _assert_two_calls(response)
    # The deltas alone tell the same story: two calls, each its own name and arguments.
    names = {d.index: d.name for d in deltas if d.name}
    assert names == {0: "add", 1: "mul"}
    for index, call in enumerate(response.message.tool_calls):
        assert "".join(d.arguments for d in deltas if d.index == index) == call.arguments


async def test_the_same_reply_without_streaming(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.tool_calls(*CALLS))
    with anyio.fail_after(GUARD):
        _assert_two_calls(await llm.complete(LLMRequest((UserMessage("go"),))))


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
async def mul(a: int) -> int:
    """Double a number."""
    return a * 2


def _script(server: MockLLMServer) -> None:
    server.script(Reply.tool_calls(*CALLS, chunks=3), Reply.text("3 and 6"))


def _results(server: MockLLMServer, api: str) -> list[str]:
    """The tool results of the second request, in order, whatever the wire format."""
    body = server.requests[1].json
    if api == "chat":
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if api == "responses":
        return [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]
    blocks = [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return [b["content"] for b in blocks if b.get("type") == "tool_result"]


@pytest.mark.parametrize("mode", ["plain", "stream", "events"])
async def test_llm_chat_runs_both_calls(
    mock_server: MockLLMServer, llm: HTTPInterface, api: str, mode: str
) -> None:
    _script(mock_server)

    @llm_chat(llm, toolkit=[add, mul], stream=mode == "stream", enable_event=mode == "events")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    history: list[dict[str, Any]] = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[])) as items:
            async for item in items:
                if isinstance(item, ResponseYield):
                    history = item.messages
                elif isinstance(item, EventYield) and isinstance(item.event, ReactEndEvent):
                    validate_history(history_from_dicts(item.event.final_messages))
                elif isinstance(item, tuple):
                    history = item[1]
    assert _results(mock_server, api) == ["3", "6"]
    validate_history(history_from_dicts(history))
    ids = [c["id"] for m in history for c in m.get("tool_calls") or ()]
    assert len(ids) == len(set(ids)) == 2  # the engine made them unique


async def test_llm_function_runs_both_calls(
    mock_server: MockLLMServer, llm: HTTPInterface, api: str
) -> None:
    _script(mock_server)

    @llm_function(llm, toolkit=[add, mul])  # never streams: the reply is whole
    async def compute(task: str) -> str:
        """Compute."""

    with anyio.fail_after(GUARD):
        assert await compute("both") == "3 and 6"
    assert _results(mock_server, api) == ["3", "6"]
