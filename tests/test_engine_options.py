"""Engine options: one frozen type both decorators take the same way; never sent to a provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from simplellmfunc import (
    EngineOptions,
    HistoryWindow,
    OpenAICompatible,
    TerminationPolicy,
    llm_chat,
    llm_function,
    tool,
)
from simplellmfunc.exceptions import DecoratorError
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

OPTION_NAMES = {
    "max_tool_calls",
    "tool_timeout",
    "max_tool_concurrency",
    "tool_result_budget",
    "tool_protocol",
    "keyword_heuristic",
    "termination",
    "history_window",
}


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


@tool
async def slow(seconds: float) -> str:
    """Sleep, then say so.

    Args:
        seconds: How long to sleep.
    """
    await anyio.sleep(seconds)
    return "slept"


def _sleep_then_answer(server: MockLLMServer) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("slow", {"seconds": 5}, id="c1")),
        Reply.text("done"),
    )


def _bodies(server: MockLLMServer) -> list[dict[str, Any]]:
    return [request.json for request in server.requests]


async def test_llm_function_takes_tool_timeout_out_of_the_request_body(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    _sleep_then_answer(mock_server)

    @llm_function(llm, toolkit=[slow], tool_timeout=0.05, temperature=0.2)
    async def f(question: str) -> str:
        """Answer."""

    assert await f("q") == "done"
    for body in _bodies(mock_server):
        assert not OPTION_NAMES & set(body), body
        assert body["temperature"] == 0.2
    tool_message = mock_server.requests[1].json["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "timed out after 0.05 seconds" in tool_message["content"]


@pytest.mark.parametrize("decorator", ["function", "chat"])
async def test_both_decorators_accept_explicit_options_the_same_way(
    mock_server: MockLLMServer, llm: OpenAICompatible, decorator: str
) -> None:
    _sleep_then_answer(mock_server)
    options = EngineOptions(tool_timeout=0.05, max_tool_concurrency=1)
    if decorator == "function":

        @llm_function(llm, toolkit=[slow], options=options)
        async def f(question: str) -> str:
            """Answer."""

        assert await f("q") == "done"
    else:

        @llm_chat(llm, toolkit=[slow], options=options)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """Answer."""

        replies = [text async for text, _ in agent("q", history=[])]
        assert replies == ["done"]
    assert "timed out" in mock_server.requests[1].json["messages"][-1]["content"]
    assert all(not OPTION_NAMES & set(body) for body in _bodies(mock_server))


@pytest.mark.parametrize("decorator", [llm_function, llm_chat])
def test_a_value_that_cannot_go_on_the_wire_is_refused_at_decoration(
    llm: OpenAICompatible, decorator: Any
) -> None:
    with pytest.raises(DecoratorError, match="tool_timout"):
        decorator(llm, tool_timout=TerminationPolicy())  # a typo'd option holding an object


@pytest.mark.parametrize("decorator", [llm_function, llm_chat])
def test_an_option_given_twice_is_refused(llm: OpenAICompatible, decorator: Any) -> None:
    with pytest.raises(DecoratorError, match="both"):
        decorator(llm, options=EngineOptions(tool_timeout=1), tool_timeout=2)


def test_options_from_a_mapping_refuse_unknown_names() -> None:
    assert EngineOptions.from_mapping({"tool_timeout": 3}).tool_timeout == 3
    with pytest.raises(DecoratorError, match="unknown engine option"):
        EngineOptions.from_mapping({"tool_timeout": 3, "temperature": 0.1})
    with pytest.raises(DecoratorError, match="tool_protocol"):
        EngineOptions(tool_protocol="smoke")  # type: ignore[arg-type]


async def test_keyword_heuristic_is_an_option_of_llm_chat(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    calls: list[str] = []

    @tool
    async def search(query: str) -> str:
        """Search.

        Args:
            query: What to look for.
        """
        calls.append(query)
        return "found"

    mock_server.script(Reply.text("I will use the search tool now."), Reply.text("It is found."))

    @llm_chat(
        llm,
        toolkit=[search],
        tool_protocol="text",
        keyword_heuristic=True,
        termination=TerminationPolicy(implicit=False),
        history_window=HistoryWindow(keep_recent_turns=4),
    )
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    replies = [text async for text, _ in agent("look it up", history=[])]
    assert calls == ["I will use the search tool now."]
    assert replies[-1] == "It is found."
    assert "tools" not in mock_server.requests[0].json  # the text protocol sends no tool specs


@pytest.mark.parametrize("name", ["stream", "messages", "tools", "response_format"])
def test_body_fields_the_framework_writes_are_refused(llm: OpenAICompatible, name: str) -> None:
    with pytest.raises(DecoratorError, match=f"{name}= cannot be a body parameter"):
        llm_function(llm, **{name: True})
