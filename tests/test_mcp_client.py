"""MCPToolset against real MCP servers: the demo server over stdio and streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from mcp_servers.support import (
    DEMO,
    FIXTURE_SERVERS,
    PAGED,
    children,
    demo_http,
    eventually,
    free_port,
    http_server,
    wait_gone,
)
from simplellmfunc import AbortSignal
from simplellmfunc._content import ImgUrl
from simplellmfunc.exceptions import AbortedError, MCPError, ToolDefinitionError
from simplellmfunc.mcp import MCPResult, MCPTool, MCPToolset
from simplellmfunc.tools import ArgumentsError, Tool, ToolContext, ToolEventEmitter, ToolProvider


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """Every server process a test starts is gone when it ends."""
    before = children()
    yield
    left = children() - before - FIXTURE_SERVERS
    assert not wait_gone(sorted(left)), "a server process outlived its test"


@pytest.fixture(scope="module")
def http_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    markers = tmp_path_factory.mktemp("http-markers")
    port = free_port()
    with http_server(demo_http(port, markers), port):
        yield f"http://127.0.0.1:{port}/mcp", markers


KINDS = pytest.mark.parametrize("kind", ["stdio", "http"])


@asynccontextmanager
async def open_demo(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[MCPToolset, Path]]:
    """The demo server's toolset (opened) and its cancellation-marker directory.

    A context manager inside each test, not a fixture: a toolset is opened and closed in one
    task, and pytest-asyncio runs a fixture's setup and teardown in different tasks.
    """
    if kind == "stdio":
        args = [str(DEMO), "--marker-dir", str(tmp_path)]
        toolset = MCPToolset.stdio(sys.executable, args, name="demo", timeout=20)
        markers = tmp_path
    else:
        url, markers = request.getfixturevalue("http_demo")
        toolset = MCPToolset.http(url, name="demo", timeout=20)
    async with toolset:
        yield toolset, markers


async def tools_of(toolset: MCPToolset) -> dict[str, MCPTool]:
    return {t.name: t for t in await toolset.list_tools() if isinstance(t, MCPTool)}


async def wait_for(path: Path) -> bool:
    """Whether the server writes ``path`` (a cancellation marker) within a few seconds."""
    return await eventually(anyio.Path(path).exists)


@KINDS
async def test_lists_tools_with_schemas_and_calls_them(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        assert isinstance(toolset, ToolProvider)
        tools = await tools_of(toolset)
        assert {"add", "get_sum", "image", "fail", "slow", "progress"} <= set(tools)
        get_sum = tools["get_sum"]
        assert isinstance(get_sum, Tool)
        assert get_sum.description.startswith("Sum a list of numbers")
        assert set(get_sum.parameters["properties"]) == {"numbers", "n"}
        assert get_sum.spec().parameters == get_sum.parameters
        assert (await tools["add"](a=2, b=3)).text == "5"
        result = await get_sum.invoke({"n": 100})
        assert isinstance(result, MCPResult)
        assert result.structured == {"result": 5050.0}
        assert get_sum.render(result) == "5050.0"
        assert (await get_sum(numbers=[1, 2, 3.5])).text == "6.5"


@KINDS
async def test_images_reach_the_model(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        tools = await tools_of(toolset)
        text, images = tools["image"].render(await tools["image"]())
        assert text == ""
        assert len(images) == 1
        assert isinstance(images[0], ImgUrl)
        assert images[0].url.startswith("data:image/png;base64,iVBOR")
        text, images = tools["mixed"].render(await tools["mixed"]())
        assert text == "a picture:"
        assert len(images) == 1


@KINDS
async def test_server_errors_are_errors_the_model_sees(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        tools = await tools_of(toolset)
        with pytest.raises(MCPError, match=r"tool 'fail' reported an error: .*no good"):
            await tools["fail"](message="no good")
        result = await toolset.call_tool("fail", {"message": "no good"})
        assert result.is_error
        assert "no good" in result.text


@KINDS
async def test_arguments_are_checked_before_sending(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        add = (await tools_of(toolset))["add"]
        with pytest.raises(
            ArgumentsError, match=r"a: 'x' is not of type 'integer'.*'b' is a required"
        ):
            await add.invoke({"a": "x"})


@KINDS
async def test_progress_streams_as_custom_events_with_the_call_id(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        progress = (await tools_of(toolset))["progress"]
        emitter = ToolEventEmitter(tool_name="progress", tool_call_id="call-7")
        result = await progress.invoke({"steps": 3}, ToolContext("call-7", "progress", emitter))
        assert result.text == "done 3"

        collected = []

        async def three() -> bool:
            collected.extend(await emitter.get_events())  # each call hands out new events
            return len(collected) >= 3

        assert await eventually(three)
        events = [e.event for e in collected]
        assert [e.event_name for e in events] == ["mcp_progress"] * 3
        assert {e.tool_call_id for e in events} == {"call-7"}
        assert sorted(e.data["progress"] for e in events) == [1.0, 2.0, 3.0]
        assert {e.data["message"] for e in events} == {"step 1", "step 2", "step 3"}


@KINDS
async def test_abort_cancels_the_call_on_the_server(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, markers):
        slow = (await tools_of(toolset))["slow"]
        signal = AbortSignal()
        context = ToolContext("c1", "slow", ToolEventEmitter(), signal)
        tag = f"abort-{id(signal)}"
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: _abort_later(signal, 0.3))
            with pytest.raises(AbortedError, match="stop now"):
                await slow.invoke({"seconds": 30, "tag": tag}, context)
        assert await wait_for(markers / f"cancelled-{tag}")
        assert (await toolset.call_tool("add", {"a": 1, "b": 1})).text == "2"


async def _abort_later(signal: AbortSignal, delay: float) -> None:
    await anyio.sleep(delay)
    signal.abort("stop now")


@KINDS
async def test_a_cancelled_call_is_cancelled_on_the_server(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, markers):
        slow = (await tools_of(toolset))["slow"]
        with anyio.move_on_after(0.3):
            await slow(seconds=30, tag="scope")
        assert await wait_for(markers / "cancelled-scope")
        assert (await toolset.call_tool("add", {"a": 1, "b": 1})).text == "2"


@KINDS
async def test_per_call_timeout(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, markers):
        with pytest.raises(MCPError, match="tool 'slow' on MCP server demo timed out"):
            await toolset.call_tool("slow", {"seconds": 30, "tag": "timeout"}, timeout=0.3)
        assert await wait_for(markers / "cancelled-timeout")


@KINDS
async def test_resources_and_prompts(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        uris = {str(r.uri) for r in await toolset.list_resources()}
        assert {"demo://greeting", "demo://pixel"} <= uris
        assert (await toolset.read_resource("demo://greeting")).text == "hello from demo"
        pixel = await toolset.read_resource("demo://pixel")
        assert pixel.images[0].url.startswith("data:image/png;base64,")
        assert [p.name for p in await toolset.list_prompts()] == ["summarize"]
        messages = await toolset.get_prompt("summarize", {"topic": "MCP"})
        assert messages == [{"role": "user", "content": "Please summarize MCP in one sentence."}]
        with pytest.raises(MCPError, match="resource 'demo://nothing'"):
            await toolset.read_resource("demo://nothing")


@KINDS
async def test_server_info_and_instructions(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    async with open_demo(kind, request, tmp_path) as (toolset, _):
        assert toolset.server_info is not None
        assert toolset.server_info.name == "demo"
        assert toolset.instructions == "A demo server for simplellmfunc tests."


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tool_list_changes_are_followed(tmp_path: Path, mode: str) -> None:
    toolset = MCPToolset.stdio(sys.executable, [str(DEMO)], mode=mode)
    async with toolset:
        tools = await tools_of(toolset)
        assert "multiply" not in tools
        await tools["add_tool"]()

        async def listed() -> bool:
            return "multiply" in await tools_of(toolset)

        assert await eventually(listed)
        multiply = (await tools_of(toolset))["multiply"]
        assert (await multiply(a=6, b=7)).text == "42"


async def test_resource_tools_are_optional_tools() -> None:
    async with MCPToolset.stdio(
        sys.executable, [str(DEMO)], prefix="demo", resource_tools=True
    ) as toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert "demo_add" in tools
        read = tools["demo_read_resource"]
        assert "demo://greeting" in read.description
        assert await read.invoke({"uri": "demo://greeting"}) == "hello from demo"
        prompt = tools["demo_get_prompt"]
        text = await prompt.invoke({"name": "summarize", "arguments": {"topic": "x"}})
        assert text == "user: Please summarize x in one sentence."


async def test_pages_are_all_listed_and_odd_names_map_back() -> None:
    async with MCPToolset.stdio(sys.executable, [str(PAGED), "--page-size", "7"]) as toolset:
        tools = {t.name: t for t in await toolset.list_tools() if isinstance(t, MCPTool)}
        assert len(tools) == 30
        assert {"tool_00", "tool_24", "dotted_name", "with_space"} <= set(tools)
        for name, tool in tools.items():
            assert len(name) <= 64
            result = await tool.invoke({"value": 1})
            assert result.text == f'called {tool.server_name} with {{"value": 1}}'
        with pytest.raises(ArgumentsError, match="value: -1 is less than the minimum of 0"):
            await tools["dotted_name"].invoke({"value": -1})


async def test_a_tool_calls_its_own_server_name_not_a_model_name_like_it() -> None:
    # With prefix "p", the server's "echo" is offered as "p_echo", which is also the server
    # name of another tool (offered as "p_p_echo"): each tool must call its own.
    argv = [str(PAGED), "--also", "echo", "--also", "p_echo"]
    async with MCPToolset.stdio(sys.executable, argv, prefix="p") as toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert (await tools["p_p_echo"].invoke({"value": 1})).text.startswith("called p_echo ")
        assert (await tools["p_echo"].invoke({"value": 1})).text.startswith("called echo ")
        # call_tool takes either name; a model-facing name wins, as documented.
        assert (await toolset.call_tool("p_echo", {"value": 1})).text.startswith("called echo ")


async def test_colliding_names_are_a_clear_error() -> None:
    async with MCPToolset.stdio(sys.executable, [str(PAGED), "--collide"]) as toolset:
        with pytest.raises(
            ToolDefinitionError, match=r"'a\.b' and 'a_b' both map to the tool name"
        ):
            await toolset.list_tools()


async def test_a_closed_toolset_says_how_to_open_it() -> None:
    toolset = MCPToolset.stdio(sys.executable, [str(DEMO)])
    with pytest.raises(MCPError, match="not open: use 'async with toolset:'"):
        await toolset.list_tools()
    await toolset.connect()
    assert toolset.connected
    await toolset.connect()  # a no-op when open
    await toolset.aclose()
    await toolset.aclose()
    assert not toolset.connected
    assert "closed" in repr(toolset)
