"""An agent (``@llm_chat`` on the mock LLM server) using an MCP server's tools end to end."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from mcp_servers.support import DEMO, children, wait_gone
from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat
from simplellmfunc.hooks import CustomEvent, EventYield, ReactEndEvent
from simplellmfunc.mcp import MCPToolset
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = children()
    yield
    assert not wait_gone(sorted(children() - before)), "a server process outlived its test"


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


def demo() -> MCPToolset:
    return MCPToolset.stdio(sys.executable, [str(DEMO)], name="demo", prefix="demo")


async def run(agent: Any, *args: Any, **kwargs: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(agent(*args, **kwargs)) as items:
            return [item async for item in items]


def events(items: list[Any], kind: type[Any]) -> list[Any]:
    return [i.event for i in items if isinstance(i, EventYield) and isinstance(i.event, kind)]


def tool_messages(server: MockLLMServer, request: int) -> dict[str, Any]:
    messages = server.requests[request].json["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


async def test_the_seed_acceptance_case_sums_1_to_100_with_an_mcp_tool(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("demo_get_sum", {"n": 100}, id="c1")),
        Reply.text("1+2+...+100 = 5050"),
    )
    async with demo() as toolset:

        @llm_chat(llm, toolkit=[toolset])
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You are a calculator; use the tools."""

        replies = await run(agent, "compute 1+2+...+100", history=[])
    text, history = replies[-1]
    assert "5050" in text
    assert tool_messages(mock_server, 1) == {"c1": "5050.0"}
    offered = {t["function"]["name"]: t["function"] for t in mock_server.requests[0].json["tools"]}
    assert offered["demo_get_sum"]["description"].startswith("Sum a list of numbers")
    assert set(offered["demo_get_sum"]["parameters"]["properties"]) == {"numbers", "n"}
    assert history[-1] == {"role": "assistant", "content": "1+2+...+100 = 5050"}


async def test_progress_and_images_flow_through_a_run(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("demo_progress", {"steps": 2}, id="c1"),
            ToolCallSpec("demo_image", {}, id="c2"),
            ToolCallSpec("demo_fail", {"message": "nope"}, id="c3"),
        ),
        Reply.text("done"),
    )
    async with demo() as toolset:

        @llm_chat(llm, toolkit=[toolset], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """Agent."""

        items = await run(agent, "go", history=[])
    custom = [
        i.event for i in items if isinstance(i, EventYield) and isinstance(i.event, CustomEvent)
    ]
    assert {(e.event_name, e.tool_call_id) for e in custom} == {("mcp_progress", "c1")}
    results = tool_messages(mock_server, 1)
    assert results["c1"] == "done 2"
    assert "tool 'fail' reported an error" in results["c3"]
    messages = mock_server.requests[1].json["messages"]
    image_parts = [
        part
        for m in messages
        if isinstance(m.get("content"), list)
        for part in m["content"]
        if part.get("type") == "image_url"
    ]
    assert image_parts[0]["image_url"]["url"].startswith("data:image/png;base64,")


async def test_abort_during_an_mcp_call_ends_the_run_cleanly(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("demo_slow", {"seconds": 30}, id="c1")))
    signal = AbortSignal()
    async with demo() as toolset:

        @llm_chat(llm, toolkit=[toolset], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """Agent."""

        async def abort_soon() -> None:
            await anyio.sleep(1.0)
            signal.abort("user pressed stop")

        async with anyio.create_task_group() as group:
            group.start_soon(abort_soon)
            items = await run(agent, "go", history=[], _abort_signal=signal)
        assert (await toolset.call_tool("demo_add", {"a": 1, "b": 2})).text == "3"
    ends = [
        i.event for i in items if isinstance(i, EventYield) and isinstance(i.event, ReactEndEvent)
    ]
    final = ends[-1].final_messages
    assert final[-1]["role"] == "tool"
    assert final[-1]["tool_call_id"] == "c1"
