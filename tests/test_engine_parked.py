"""The previous reply while the next LLM call waits: its raw JSON parked as text, given back
whole when that call is aborted (engine/_parked.py)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat, tool
from simplellmfunc._messages import AssistantMessage, UserMessage
from simplellmfunc.engine import RunResult
from simplellmfunc.engine._parked import park, unpark
from simplellmfunc.hooks import EventYield, LLMCallStartEvent
from simplellmfunc.providers import LLMRequest, LLMResponse
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


def model(server: MockLLMServer) -> OpenAICompatible:
    return OpenAICompatible("sk-test-123456789", "mock-model", server.url)


async def test_a_parked_reply_reads_as_the_reply(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("lookup", {"q": "ünïcode"}, id="c1")))
    async with model(mock_server) as llm:
        response = await llm.complete(LLMRequest(messages=(UserMessage("hi"),)))
    assert type(response.raw) is dict
    parked = park(response)
    assert parked is not None
    assert parked.raw is not None
    assert type(parked.raw) is not dict
    assert isinstance(parked.raw, Mapping)
    assert parked == response  # every field, raw compared as a mapping
    assert parked.raw["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    assert dict(parked.raw) == response.raw
    back = unpark(parked)
    assert back is not None
    assert type(back.raw) is dict
    assert back == response
    assert json.dumps(back.raw) == json.dumps(response.raw)
    assert unpark(response) is response  # not parked: as it is


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {"pair": (1, 2)},  # a tuple would come back a list
        {1: "one"},  # a key that is not a string
        {"when": datetime.date(2026, 1, 1)},  # not JSON
        {"nan": float("nan")},
    ],
)
def test_a_raw_the_round_trip_would_change_is_not_parked(raw: Any) -> None:
    response = LLMResponse(AssistantMessage("hi"), raw=raw)
    assert park(response) is response
    assert park(None) is None


async def test_an_aborted_call_leaves_the_previous_reply_whole(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("lookup", {"q": "x"}, id="c1")),
        Reply.text("never sent", ttft=GUARD * 2),  # the second call waits until it is aborted
    )

    @tool
    async def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    abort = AbortSignal()
    starts = 0
    seen_during_the_call: list[Mapping[str, Any] | None] = []
    items = []
    async with model(mock_server) as llm:

        @llm_chat(llm, toolkit=[lookup])
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """Agent."""

        run = await agent.run("go", _abort_signal=abort)
        with anyio.fail_after(GUARD):
            async for item in run:
                items.append(item)
                if isinstance(item, EventYield) and isinstance(item.event, LLMCallStartEvent):
                    starts += 1
                    if starts == 2:
                        last = run.context.state.last_response
                        seen_during_the_call.append(None if last is None else last.raw)
                        abort.abort("stop")
    result = items[-1]
    assert isinstance(result, RunResult)
    assert result.terminated_by == "aborted"
    (raw,) = seen_during_the_call  # parked, and still readable as the reply's JSON
    assert raw is not None
    assert raw["choices"][0]["finish_reason"] == "tool_calls"
    assert type(raw) is not dict  # held as text while the call waited
    last = result.response
    assert last is not None
    assert type(last.raw) is dict
    assert last.raw["choices"][0]["message"]["tool_calls"][0]["id"] == "c1"
    assert last.message.tool_calls[0].id == "c1"
