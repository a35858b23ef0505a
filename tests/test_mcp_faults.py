"""MCPToolset when things go wrong: crashes, restarts, timeouts, bad output, misuse, secrets."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from mcp_servers.support import (
    DEMO,
    children,
    demo_http,
    eventually,
    free_port,
    gone,
    running,
    serving,
    wait_gone,
)
from simplellmfunc.exceptions import MCPError, UserError
from simplellmfunc.mcp import MCPToolset

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = children()
    yield
    assert not wait_gone(sorted(children() - before)), "a server process outlived its test"


def demo(**options: object) -> MCPToolset:
    return MCPToolset.stdio(sys.executable, [str(DEMO)], name="demo", **options)  # type: ignore[arg-type]


async def pid_of(toolset: MCPToolset) -> int:
    return int((await toolset.call_tool("pid")).text)


async def test_a_crash_fails_only_the_calls_in_flight_and_the_next_call_restarts() -> None:
    async with demo() as toolset:
        first = await pid_of(toolset)
        failures: list[str] = []

        async def slow() -> None:
            try:
                await toolset.call_tool("slow", {"seconds": 30})
            except MCPError as exc:
                failures.append(str(exc))

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            await anyio.sleep(0.3)
            with pytest.raises(MCPError, match="MCP server demo disconnected during tool 'crash'"):
                await toolset.call_tool("crash")
        assert failures == ["MCP server demo disconnected during tool 'slow'"]
        assert await gone([first])
        second = await pid_of(toolset)
        assert second != first
        assert (await toolset.call_tool("add", {"a": 2, "b": 2})).text == "4"


async def test_call_retries_send_a_call_cut_by_a_crash_again(tmp_path: Path) -> None:
    # Without retries (the default) a crash fails the call in flight, as the test above shows:
    # it may have had effects. With call_retries it is sent again on a fresh session.
    args = [str(DEMO), "--marker-dir", str(tmp_path)]
    async with MCPToolset.stdio(sys.executable, args, name="demo", call_retries=1) as toolset:
        assert (await toolset.call_tool("crash_once", {"tag": "b"})).text == "survived"
        assert (tmp_path / "crashed-b").exists()  # the first call did reach the server
    with pytest.raises(UserError, match="call_retries must be 0 or more"):
        MCPToolset.stdio(sys.executable, args, call_retries=-1)


async def test_mcp_tools_and_mcp_tool_helpers(tmp_path: Path) -> None:
    from simplellmfunc.mcp import mcp_tool, mcp_tools

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serving(demo_http(port, tmp_path), port):
        async with mcp_tools(url) as tools:
            assert {"add", "pid", "slow"} <= {t.name for t in tools}
        async with mcp_tool(url, "add") as add:
            assert (await add(a=40, b=2)).text == "42"
        with pytest.raises(MCPError, match=r"has no tool 'nope' \(tools: .*add"):
            async with mcp_tool(url, "nope"):
                pass


async def test_descendants_die_with_their_server() -> None:
    async with demo() as toolset:
        grandchild = int((await toolset.call_tool("spawn")).text)
        assert running(grandchild)
    assert await gone([grandchild])


async def test_descendants_of_a_crashed_server_are_stopped_too() -> None:
    async with demo() as toolset:
        grandchild = int((await toolset.call_tool("spawn")).text)
        with pytest.raises(MCPError, match="disconnected"):
            await toolset.call_tool("crash")
        assert await gone([grandchild])
        assert (await toolset.call_tool("add", {"a": 1, "b": 2})).text == "3"


async def test_a_malformed_message_fails_that_request_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with demo() as toolset:
        with pytest.raises(MCPError, match="malformed response from the server"):
            await toolset.call_tool("garbage")
        assert (await toolset.call_tool("add", {"a": 1, "b": 2})).text == "3"
    assert "wrote a line that is no MCP message: 'this line is not JSON'" in caplog.text


async def test_connect_timeout_leaves_nothing_running() -> None:
    toolset = MCPToolset.stdio(SLEEPER[0], SLEEPER[1:], connect_timeout=0.5)
    with pytest.raises(MCPError, match=r"cannot connect to MCP server stdio:python.*within 0.5 s"):
        await toolset.connect()
    assert not toolset.connected


async def test_a_missing_command_is_a_clear_error() -> None:
    toolset = MCPToolset.stdio("/nonexistent/mcp-server-binary")
    with pytest.raises(MCPError, match="command not found"):
        await toolset.connect()


async def test_cancelling_a_connect_leaves_nothing_running() -> None:
    toolset = MCPToolset.stdio(SLEEPER[0], SLEEPER[1:])
    with anyio.move_on_after(0.5):
        await toolset.connect()
    assert not toolset.connected


async def test_secrets_stay_with_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    monkeypatch.setenv("MCP_TEST_PASSTHROUGH", "through")
    options = {"env": {"GIVEN": "given"}, "inherit_env": ["MCP_TEST_PASSTHROUGH"]}
    async with MCPToolset.stdio(sys.executable, [str(DEMO)], **options) as toolset:  # type: ignore[arg-type]
        assert (await toolset.call_tool("env", {"name": "OPENAI_API_KEY"})).text == "<unset>"
        assert (await toolset.call_tool("env", {"name": "GIVEN"})).text == "given"
        passed = await toolset.call_tool("env", {"name": "MCP_TEST_PASSTHROUGH"})
        assert passed.text == "through"


async def test_server_stderr_goes_to_our_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="simplellmfunc.mcp.stderr")
    async with demo() as toolset:
        await toolset.call_tool("shout", {"text": "hello from stderr"})

        async def logged() -> bool:
            return "[demo] hello from stderr" in caplog.text

        assert await eventually(logged)


async def test_http_server_restart_gets_a_new_session(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    toolset = MCPToolset.http(url, name="web", max_reconnects=2)
    async with serving(demo_http(port, tmp_path), port):
        await toolset.connect()
    try:
        # The server is gone: the call fails after bounded reconnects, naming the server.
        with pytest.raises(MCPError, match="web"):
            await toolset.call_tool("add", {"a": 1, "b": 2})
        with pytest.raises(MCPError, match="cannot connect to MCP server web after 2 attempts"):
            await toolset.call_tool("add", {"a": 1, "b": 2})
        async with serving(demo_http(port, tmp_path), port):
            assert (await toolset.call_tool("add", {"a": 1, "b": 2})).text == "3"
    finally:
        await toolset.aclose()


async def test_an_http_call_in_flight_fails_when_the_server_dies(tmp_path: Path) -> None:
    port = free_port()
    failures: list[MCPError] = []
    async with (
        serving(demo_http(port, tmp_path), port) as server,
        MCPToolset.http(f"http://127.0.0.1:{port}/mcp", name="web") as toolset,
    ):

        async def call() -> None:
            try:
                await toolset.call_tool("slow", {"seconds": 30})
            except MCPError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            await anyio.sleep(0.3)
            os.killpg(server.pid, signal.SIGKILL)
    assert [str(f) for f in failures] == ["MCP server web disconnected during tool 'slow'"]


@pytest.fixture
async def opened_elsewhere() -> AsyncIterator[MCPToolset]:
    """pytest-asyncio runs this fixture's setup and teardown in different tasks."""
    toolset = demo()
    await toolset.connect()
    yield toolset
    pid = toolset_pid.pop()
    with pytest.raises(UserError, match="closed in another task"):
        await toolset.aclose()
    assert not wait_gone([pid])


toolset_pid: list[int] = []


async def test_closing_in_another_task_still_stops_the_server(
    opened_elsewhere: MCPToolset,
) -> None:
    toolset_pid.append(await pid_of(opened_elsewhere))


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_restarted_http_server_is_reached_again(tmp_path: Path, mode: str) -> None:
    port = free_port()
    toolset = MCPToolset.http(f"http://127.0.0.1:{port}/mcp", name="web", mode=mode)
    async with serving(demo_http(port, tmp_path), port):
        await toolset.connect()
        first = await pid_of(toolset)
    try:
        # A new server process on the same port knows nothing of our session.
        async with serving(demo_http(port, tmp_path), port):
            assert await pid_of(toolset) != first
    finally:
        await toolset.aclose()
