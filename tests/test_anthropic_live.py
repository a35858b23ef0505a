"""AnthropicCompatible against a third-party Messages API: llama.cpp's own ``llama-server``
(built from the sources vendored in the llama-cpp-python sdist, serving SmolLM2-135M), in
``make test-live``.

Correct answers are not required from a 135M model; a clean run through the whole stack is.
The first run builds the server (about 9 minutes on 2 idle cores; see ``scripts/llama_server.py``).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from simplellmfunc import llm_chat, tool
from simplellmfunc._messages import SystemMessage, UserMessage
from simplellmfunc.hooks import ReactEndEvent, is_event_yield
from simplellmfunc.providers import FinishEvent, LLMRequest, TextDelta
from simplellmfunc.providers._anthropic import AnthropicCompatible
from simplellmfunc.types import history_from_dicts

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

REQUEST = LLMRequest(
    (SystemMessage("You are a helpful assistant. Answer briefly."), UserMessage("Say hello."))
)


@pytest.fixture(scope="module")
def server_binary() -> Path:
    from llama_server import build

    return build()  # idempotent: builds once, then reuses the binary


@pytest.fixture
async def llm(server_binary: Path) -> AsyncIterator[AnthropicCompatible]:
    from llama_server import llama_server

    async with (
        llama_server() as base_url,
        AnthropicCompatible(
            None,
            "SmolLM2-135M-Instruct",
            f"{base_url}/v1",
            max_tokens=96,
            timeout=180.0,
            provider_name="llama-server",
        ) as interface,
    ):
        yield interface


@tool
async def add(a: int, b: int) -> int:
    """Add two integers and return the sum."""
    return a + b


async def test_plain_reply_complete_stream_and_count_tokens(llm: AnthropicCompatible) -> None:
    response = await llm.complete(REQUEST)
    assert response.finish_reason in ("stop", "length")
    assert response.usage.calls == 1
    assert response.usage.completion_tokens > 0

    events = [event async for event in llm.stream(REQUEST)]
    final = events[-1]
    assert isinstance(final, FinishEvent)
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert streamed == final.response.text
    assert final.response.finish_reason in ("stop", "length")

    count = await llm.count_tokens(REQUEST.messages)
    assert count > 0
    assert llm._count_endpoint  # answered by /v1/messages/count_tokens, not estimated


async def test_tool_request_at_the_wire(llm: AnthropicCompatible) -> None:
    message = UserMessage("What is 2 + 3? Use the add tool.")
    request = LLMRequest((message,), tools=(add.spec(),), tool_choice="auto")
    for api in ("complete", "stream"):
        if api == "complete":
            response = await llm.complete(request)
        else:
            events = [event async for event in llm.stream(request)]
            assert isinstance(events[-1], FinishEvent)
            response = events[-1].response
        assert response.finish_reason in ("stop", "length", "tool_calls")
        for call in response.message.tool_calls:
            assert call.name
            assert call.id


async def test_tool_calling_agent_turn(llm: AnthropicCompatible) -> None:
    @llm_chat(
        llm,
        toolkit=[add],
        enable_event=True,
        max_tool_calls=2,
        stream=True,
        incomplete_answer="flag",  # Gemma 3 270M's answer may run past max_tokens: flagged
    )
    async def agent(message: str, history: list[dict[str, object]] | None = None) -> None:
        """You are a calculator. Use the add tool for every sum."""

    end = None
    with anyio.fail_after(600):
        async for item in agent("What is 2 + 3? Use the add tool."):
            if is_event_yield(item) and isinstance(item.event, ReactEndEvent):
                end = item.event
    assert end is not None
    assert end.terminated_by in ("answer", "max_steps", "truncated", "empty")
    history_from_dicts(end.final_messages)  # valid for the next call
