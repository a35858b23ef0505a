"""ScriptedLLM: the in-process model for users' unit tests."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import AbortSignal, llm_chat, llm_function, tool
from simplellmfunc.exceptions import AbortedError, RateLimitError, UserError
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from simplellmfunc.testing import ToolCallSpec
from simplellmfunc.testing._scripted import ScriptedLLM
from simplellmfunc.types import ToolCall, Usage, UserMessage, history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
REQUEST = LLMRequest(messages=(UserMessage("hello there"),))


async def collect(stream: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(stream) as items:
            return [item async for item in items]


async def test_canned_replies_in_order_and_requests_recorded() -> None:
    fixed = ScriptedLLM.response("fixed", usage=(3, 4))
    llm = ScriptedLLM(["first", fixed, lambda request: f"echo {len(request.messages)}"])
    assert llm.pending == 3
    assert (await llm.complete(REQUEST)).text == "first"
    second = await llm.complete(REQUEST)
    assert second.text == "fixed"
    assert second.usage == Usage(3, 4, 7, calls=1)
    assert second.model == "scripted"
    assert (await llm.complete(REQUEST)).text == "echo 1"
    assert llm.requests == [REQUEST, REQUEST, REQUEST]
    with pytest.raises(UserError, match="no scripted reply left"):
        await llm.complete(REQUEST)


async def test_default_exceptions_and_bad_items() -> None:
    llm = ScriptedLLM([RateLimitError("slow down", status=429)], default="again")
    with pytest.raises(RateLimitError):
        await llm.complete(REQUEST)
    assert (await llm.complete(REQUEST)).text == "again"
    assert (await llm.complete(REQUEST)).text == "again"
    with pytest.raises(UserError):
        llm.script(42)  # type: ignore[arg-type]
    llm.script(lambda request: 42)  # type: ignore[arg-type, return-value]
    with pytest.raises(UserError, match="must return"):
        await llm.complete(REQUEST)


async def test_usage_is_estimated_when_not_given() -> None:
    llm = ScriptedLLM(["12345678"])
    usage = (await llm.complete(REQUEST)).usage
    assert usage == Usage(2, 2, 4, calls=1, estimated=True)  # about 4 characters per token


async def test_stream_splits_text_calls_and_ends_with_finish() -> None:
    reply = ScriptedLLM.response(
        "Hello world",
        tool_calls=[ToolCallSpec("add", {"a": 1}, id="c1"), ToolCall("c2", "sub", "{}")],
        reasoning="think",
        usage=(5, 6),
    )
    llm = ScriptedLLM([reply], chunks=3)
    events = await collect(llm.stream(REQUEST))
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["th", "in", "k"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hell", "o wo", "rld"]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas[0] == ToolCallDelta(0, "c1", "add", "")
    assert "".join(d.arguments for d in deltas if d.index == 0) == '{"a": 1}'
    assert [d for d in deltas if d.index == 1] == [
        ToolCallDelta(1, "c2", "sub", ""),
        ToolCallDelta(1, None, None, "{"),
        ToolCallDelta(1, None, None, "}"),
    ]
    assert isinstance(events[-2], UsageEvent)
    finish = events[-1]
    assert isinstance(finish, FinishEvent)
    assert finish.response.message.tool_calls[0].id == "c1"
    assert finish.response.finish_reason == "tool_calls"


def test_response_helper_gives_unique_ids() -> None:
    first = ScriptedLLM.response(tool_calls=[ToolCallSpec("a")])
    second = ScriptedLLM.response(tool_calls=[ToolCallSpec("a")])
    assert first.message.tool_calls[0].id != second.message.tool_calls[0].id
    assert first.message.content is None
    assert isinstance(first, LLMResponse)


# -- with the decorators --------------------------------------------------------------------


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Sum(BaseModel):
    total: int


@pytest.mark.parametrize("stream", [False, True])
async def test_drives_a_chat_agent_with_tools(stream: bool) -> None:
    llm = ScriptedLLM(
        [ScriptedLLM.response(tool_calls=[ToolCallSpec("add", {"a": 2, "b": 3})]), "It is 5."]
    )

    @llm_chat(llm, toolkit=[add], stream=stream)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You add."""

    outputs = await collect(agent("2+3?", history=[]))
    assert "".join(text for text, _ in outputs) == "It is 5."
    history = outputs[-1][1]
    history_from_dicts(history)
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert history[3]["content"] == "5"
    second = llm.requests[1]
    assert [t.name for t in second.tools] == ["add"]
    assert second.messages[-1].content == "5"


async def test_drives_a_typed_function_with_repairs() -> None:
    llm = ScriptedLLM(["five", '{"total": 5}'], capabilities=Capabilities(json_schema=False))

    @llm_function(llm)
    async def total(numbers: list[int]) -> Sum:
        """Sum the numbers."""

    with anyio.fail_after(GUARD):
        assert await total([2, 3]) == Sum(total=5)
    first = llm.requests[0]
    assert first.response_format is None
    assert "## Output format" in str(first.messages[0])
    assert "not valid JSON" in str(llm.requests[1].messages[-1])


async def test_delay_lets_tests_abort() -> None:
    llm = ScriptedLLM(["never seen"], delay=60)
    abort = AbortSignal()

    @llm_function(llm)
    async def answer(q: str) -> str:
        """Answer."""

    async def stop() -> None:
        await anyio.sleep(0.01)
        abort.abort("test")

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(stop)
            with pytest.raises(AbortedError):
                await answer("q", _abort_signal=abort)
