"""Deferred (client-side) tools in the engine: a run stops at their calls with
``terminated_by="deferred"`` and the pending calls, ``agent.resume(history, results)``
continues it; the server-side calls of the same batch run; the history is valid throughout."""

from __future__ import annotations

from typing import Any

import pytest

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc._abort import AbortSignal
from simplellmfunc._events import ReactEndEvent, ResponseYield
from simplellmfunc._messages import history_from_dicts
from simplellmfunc.engine import DeferredTool, pending_calls
from simplellmfunc.exceptions import InvalidHistoryError, UserError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

KEY = "sk-test-123456789"

weather = DeferredTool(
    "get_weather",
    "The weather in a city (the browser knows).",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def _events(agent: Any, *args: Any, **kwargs: Any) -> tuple[ReactEndEvent, ResponseYield]:
    end: ReactEndEvent | None = None
    response: ResponseYield | None = None
    async for item in agent(*args, **kwargs):
        if isinstance(item, ResponseYield):
            response = item
        elif isinstance(item.event, ReactEndEvent):
            end = item.event
    assert end is not None
    assert response is not None
    return end, response


async def test_deferred_call_ends_the_run_and_resume_continues(mock_server: MockLLMServer) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("add", {"a": 2, "b": 3}, id="c1"),
            ToolCallSpec("get_weather", {"city": "Paris"}, id="c2"),
        ),
        Reply.text("5, and sunny in Paris."),
    )
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[add, weather], enable_event=True)
        async def helper(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        end, response = await _events(helper, "2+3 and the weather?", history=[])
        assert end.terminated_by == "deferred"
        history = list(response.messages)
        # The server-side call ran; the deferred one is pending, the history valid with it.
        assert [m["role"] for m in history] == ["system", "user", "assistant", "tool"]
        assert history[-1] == {"role": "tool", "tool_call_id": "c1", "content": "5"}
        (pending,) = pending_calls(history)
        assert (pending.id, pending.name) == ("c2", "get_weather")
        with pytest.raises(InvalidHistoryError):
            history_from_dicts(history)  # not sendable until the client answers
        with pytest.raises(InvalidHistoryError, match="not pending"):
            async for _ in helper.resume(history, {"c9": "x"}):
                pass
        items = [item async for item in helper.resume(history, {"c2": "sunny, 21 C"})]
    final = items[-1]
    assert isinstance(final, ResponseYield)
    assert final.response == "5, and sunny in Paris."
    sent = mock_server.requests[1].json["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "c2", "content": "sunny, 21 C"}
    assert [t["function"]["name"] for t in mock_server.requests[0].json["tools"]] == [
        "add",
        "get_weather",
    ]
    history_from_dicts(final.messages)  # valid


async def test_plain_run_result_and_abort_answer_pending_calls(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Oslo"}, id="w1")))
    async with OpenAICompatible(KEY, "mock-model", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[weather])
        async def plain(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        outputs = [item async for item in plain("weather?", history=[])]
        history = outputs[-1][1]
        assert pending_calls(history)[0].name == "get_weather"

        mock_server.script(Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Rome"})))
        abort = AbortSignal()
        abort.abort("stop")  # before the batch: the deferred call is answered, not left open
        outputs = [item async for item in plain("again", history=[], _abort_signal=abort)]
        history_from_dicts(outputs[-1][1])
    with pytest.raises(UserError, match="deferred"):
        await weather(city="x")
