"""Runaway runs (seed 001 §1.3, §3.4): repeated tool calls are warned about, then stopped."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import EngineOptions, OpenAICompatible, PauseSignal, llm_chat, tool
from simplellmfunc.events import EventYield, ReactEndEvent
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
CALLS: list[str] = []


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    CALLS.clear()
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


@tool
async def lookup(city: str) -> str:
    """Look the weather up.

    Args:
        city: The city.
    """
    CALLS.append(city)
    return f"sunny in {city}"


def _call(city: str, n: int) -> Reply:
    return Reply.tool_calls(ToolCallSpec("lookup", {"city": city}, id=f"c{n}"))


async def _run(llm: OpenAICompatible, options: EngineOptions | None = None) -> list[Any]:
    @llm_chat(llm, toolkit=[lookup], enable_event=True, options=options)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    with anyio.fail_after(GUARD):
        async with aclosing(agent("weather?", history=[])) as items:
            return [item async for item in items]


def _end(items: list[Any]) -> ReactEndEvent:
    event = [i.event for i in items if isinstance(i, EventYield)][-1]
    assert isinstance(event, ReactEndEvent)
    return event


def _last_tool_text(server: MockLLMServer, request: int) -> str:
    content: str = server.requests[request].json["messages"][-1]["content"]
    return content


async def test_a_repeated_call_is_warned_about_then_stopped(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(*[_call("Oslo", n) for n in range(6)])
    items = await _run(llm)
    end = _end(items)
    assert end.terminated_by == "loop"
    assert CALLS == ["Oslo"] * 3  # the fourth repetition was not run
    assert "[Loop warning]" not in _last_tool_text(mock_server, 1)
    assert "[Loop warning]" in _last_tool_text(mock_server, 3)
    assert len(mock_server.requests) == 4
    history = history_from_dicts(end.final_messages)  # valid: the last calls are answered
    assert "repeated after a warning" in history[-1].content  # type: ignore[union-attr]


async def test_alternating_calls_are_a_loop_too(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(*[_call("Oslo" if n % 2 else "Rome", n) for n in range(8)])
    end = _end(await _run(llm))
    assert end.terminated_by == "loop"
    assert CALLS == ["Rome", "Oslo", "Rome", "Oslo"]
    history_from_dicts(end.final_messages)


async def test_a_model_that_changes_course_after_the_warning_goes_on(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        *[_call("Oslo", n) for n in range(3)], _call("Rome", 3), Reply.text("Sunny in both.")
    )
    end = _end(await _run(llm))
    assert end.terminated_by == "answer"
    assert end.final_response == "Sunny in both."
    assert CALLS == ["Oslo", "Oslo", "Oslo", "Rome"]


async def test_loop_detection_can_be_switched_off(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(*[_call("Oslo", n) for n in range(5)], Reply.text("Done."))
    end = _end(await _run(llm, EngineOptions(loop_window=0)))
    assert end.terminated_by == "answer"
    assert CALLS == ["Oslo"] * 5
    assert all(
        "[Loop warning]" not in r.json["messages"][-1]["content"] for r in mock_server.requests[1:]
    )


async def test_the_step_budget_is_shown_when_it_runs_low(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    cities = ["A", "B", "C", "D", "E"]
    mock_server.script(*[_call(c, n) for n, c in enumerate(cities)], Reply.text("Done."))
    end = _end(await _run(llm, EngineOptions(max_tool_calls=5)))
    assert end.terminated_by == "max_steps"
    notes = ["[Step budget]" in _last_tool_text(mock_server, n) for n in range(1, 6)]
    assert notes == [False, False, False, True, False]  # 1 round left after the 4th; then final
    assert "1 tool round left" in _last_tool_text(mock_server, 4)


async def test_a_paused_run_stops_at_a_safe_point_and_resumes(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(_call("Oslo", 0), _call("Rome", 1), Reply.text("Sunny in both."))
    pause = PauseSignal()

    @tool
    async def lookup(city: str) -> str:
        """Look the weather up; the user presses "pause" while it runs.

        Args:
            city: The city.
        """
        CALLS.append(city)
        pause.pause()  # the run finishes this batch and stops before its next LLM call
        return f"sunny in {city}"

    @llm_chat(llm, toolkit=[lookup])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    with anyio.fail_after(GUARD):
        outputs = [out async for out in agent("weather?", history=[], _pause_signal=pause)]
    paused = outputs[-1][1]
    history_from_dicts(paused)  # valid at the pause point
    assert paused[-1] == {"role": "tool", "tool_call_id": "c0", "content": "sunny in Oslo"}
    assert len(mock_server.requests) == 1
    assert CALLS == ["Oslo"]

    with anyio.fail_after(GUARD):
        resumed = [out async for out in agent.resume(paused)]  # type: ignore[attr-defined]
    assert resumed[-1][0] == "Sunny in both."
    assert CALLS == ["Oslo", "Rome"]
    final = resumed[-1][1]
    assert final[: len(paused)] == paused
    history_from_dicts(final)
    # No new user message: the model continued from the tool result.
    assert mock_server.requests[1].json["messages"][-1]["role"] == "tool"


async def test_llm_function_refuses_a_pause_signal(llm: OpenAICompatible) -> None:
    from simplellmfunc import llm_function
    from simplellmfunc.exceptions import DecoratorError

    @llm_function(llm)
    async def f(q: str) -> str:
        """Answer."""

    with pytest.raises(DecoratorError, match="pause"):
        await f("q", _pause_signal=PauseSignal())
