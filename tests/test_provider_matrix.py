"""The same decorator behaviour on every HTTP provider, at the wire against the mock server."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import (
    AbortSignal,
    AnthropicCompatible,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    llm_chat,
    llm_function,
    tool,
)
from simplellmfunc.hooks import LLMCallEndEvent, ReactEndEvent, is_event_yield
from simplellmfunc.providers import LLMInterface
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

PROVIDERS = {
    "chat_completions": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}


@pytest.fixture(params=sorted(PROVIDERS))
async def setup(request: pytest.FixtureRequest) -> Any:
    async with MockLLMServer() as server:
        llm = PROVIDERS[request.param]("sk-test-key-0000", "mock-model", server.url)
        async with llm:
            yield server, llm


class City(BaseModel):
    name: str
    population: int


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_typed_function(setup: tuple[MockLLMServer, LLMInterface]) -> None:
    server, llm = setup
    server.script(Reply.text('{"name": "Paris", "population": 2100000}'))

    @llm_function(llm)
    async def biggest(country: str) -> City:
        """Return the biggest city of the country."""

    assert await biggest("France") == City(name="Paris", population=2100000)


@pytest.mark.parametrize("stream", [False, True])
async def test_tool_turn(setup: tuple[MockLLMServer, LLMInterface], stream: bool) -> None:
    server, llm = setup
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}, id="call_a")),
        Reply.text("2 + 3 = 5", chunks=3),
    )

    @llm_chat(llm, toolkit=[add], stream=stream, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]] | None = None):
        """You add numbers with the tool."""

    usage_per_call = []
    end = None
    async for item in agent("2+3?"):
        if is_event_yield(item):
            if isinstance(item.event, LLMCallEndEvent):
                usage_per_call.append(item.event.usage)
            if isinstance(item.event, ReactEndEvent):
                end = item.event
    assert end is not None
    assert end.final_response == "2 + 3 = 5"
    assert end.total_usage.total_tokens == sum(u.total_tokens for u in usage_per_call)
    history = history_from_dicts(end.final_messages)
    assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    assert len(server.requests) == 2


async def test_abort_mid_stream(setup: tuple[MockLLMServer, LLMInterface]) -> None:
    server, llm = setup
    server.script(Reply.text("word " * 400, chunks=400, chunk_delay=0.01))

    @llm_chat(llm, stream=True)
    async def agent(message: str, history: list[dict[str, Any]] | None = None):
        """You talk a lot."""

    signal = AbortSignal()
    received = ""
    history: list[dict[str, Any]] = []
    with anyio.fail_after(20):
        async for delta, history in agent("talk", _abort_signal=signal):  # noqa: B007
            received += delta
            if len(received) > 30:
                signal.abort("enough")
    last = history[-1]
    assert last["role"] == "assistant"
    assert last["truncated"] is True
    history_from_dicts(history)
