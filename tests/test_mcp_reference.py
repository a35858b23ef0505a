"""MCPToolset against servers we did not write: the npm reference server and mcp-server-time.

``@modelcontextprotocol/server-everything`` comes from npm, installed into ``.cache/npm`` by
``make mcp-reference`` (which then runs this module), never by the test run itself: without it
the tests that need it skip, saying how to install it. Its HTTP modes are kept on 127.0.0.1.
``mcp-server-time`` comes from PyPI (a dev dependency).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from mcp_servers.support import (
    DEMO,
    LOCALHOST_ONLY,
    children,
    free_port,
    serving,
    wait_gone,
)
from simplellmfunc.exceptions import MCPError
from simplellmfunc.mcp import MCPServerGroup, MCPToolset
from simplellmfunc.tools import ToolContext, ToolEventEmitter

EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
NPM_DIR = Path(__file__).resolve().parents[1] / ".cache" / "npm"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = children()
    yield
    assert not wait_gone(sorted(children() - before)), "a server process outlived its test"


@pytest.fixture(scope="session")
def everything() -> list[str]:
    """``node <server-everything>`` when ``make mcp-reference`` installed it; else a skip."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = NPM_DIR / "node_modules" / EVERYTHING / "dist" / "index.js"
    if not _installed(script):
        pytest.skip(
            f"{EVERYTHING}@{EVERYTHING_VERSION} is not installed in {NPM_DIR} "
            "(`make mcp-reference` installs it with npm and runs these tests)"
        )
    return [node, "--require", str(LOCALHOST_ONLY), str(script)]


def _installed(script: Path) -> bool:
    package = script.parents[1] / "package.json"
    if not script.is_file() or not package.is_file():
        return False
    return bool(json.loads(package.read_text())["version"] == EVERYTHING_VERSION)


async def test_everything_over_stdio(
    everything: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    toolset = MCPToolset.stdio(everything[0], [*everything[1:], "stdio"], prefix="everything")
    async with toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert {"everything_get-sum", "everything_echo", "everything_get-tiny-image"} <= set(tools)
        get_sum = tools["everything_get-sum"]
        assert get_sum.parameters["required"] == ["a", "b"]
        assert "$schema" not in get_sum.parameters
        assert (await get_sum.invoke({"a": 1, "b": 2})).text == "The sum of 1 and 2 is 3."

        image = tools["everything_get-tiny-image"]
        _, images = image.render(await image.invoke({}))
        assert images[0].url.startswith("data:image/png;base64,")

        links = (await tools["everything_get-resource-links"].invoke({"count": 2})).text
        assert links.count("[resource link]") == 2
        reference = await tools["everything_get-resource-reference"].invoke({})
        assert "[resource demo://resource/dynamic/text/1]" in reference.text

        env = json.loads((await tools["everything_get-env"].invoke({})).text)
        assert "OPENAI_API_KEY" not in env
        assert "PATH" in env


async def test_everything_reports_progress(everything: list[str]) -> None:
    toolset = MCPToolset.stdio(everything[0], [*everything[1:], "stdio"])
    async with toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        emitter = ToolEventEmitter(tool_name="long", tool_call_id="p1")
        result = await tools["trigger-long-running-operation"].invoke(
            {"duration": 0.3, "steps": 3}, ToolContext("p1", "long", emitter)
        )
        assert "Steps: 3" in result.text
        progress = sorted(e.event.data["progress"] for e in await emitter.get_events())
        assert progress == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(("mode", "path"), [("streamableHttp", "/mcp"), ("sse", "/sse")])
async def test_everything_over_http_on_loopback(
    everything: list[str], mode: str, path: str
) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PORT": str(port)}
    async with serving([*everything, mode], port, env=env) as server:
        listening = {
            c.laddr.ip
            for c in psutil.Process(server.pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }
        assert listening == {"127.0.0.1"}
        url = f"http://127.0.0.1:{port}{path}"
        toolset = MCPToolset.sse(url) if mode == "sse" else MCPToolset.http(url)
        async with toolset:
            tools = {t.name: t for t in await toolset.list_tools()}
            assert (await tools["get-sum"].invoke({"a": 20, "b": 22})).text.endswith("is 42.")
            assert (await tools["echo"].invoke({"message": "hi"})).text == "Echo: hi"


@pytest.fixture(scope="session")
def time_server() -> list[str]:
    if importlib.util.find_spec("mcp_server_time") is None:
        pytest.skip("mcp-server-time is not installed (a dev dependency)")
    return [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]


async def test_mcp_server_time(time_server: list[str]) -> None:
    async with MCPToolset.stdio(time_server[0], time_server[1:]) as toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert {"get_current_time", "convert_time"} <= set(tools)
        now = await tools["get_current_time"].invoke({"timezone": "Europe/Paris"})
        assert now.structured["timezone"] == "Europe/Paris"
        assert '"timezone": "Europe/Paris"' in now.text
        with pytest.raises(MCPError, match="reported an error"):
            await tools["get_current_time"].invoke({"timezone": "Not/AZone"})


async def test_a_config_file_opens_several_servers_as_one_toolkit(
    everything: list[str], time_server: list[str], tmp_path: Path
) -> None:
    config = {
        "mcpServers": {
            "everything": {"command": everything[0], "args": [*everything[1:], "stdio"]},
            "time": {"command": time_server[0], "args": time_server[1:]},
            "demo": {"command": sys.executable, "args": [str(DEMO)]},
        }
    }
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(config))
    group = MCPToolset.from_config(path)
    assert isinstance(group, MCPServerGroup)
    async with group:
        names = {t.name: t for t in await group.list_tools()}
        assert {"everything_get-sum", "time_get_current_time", "demo_get_sum"} <= set(names)
        assert (await names["demo_get_sum"].invoke({"n": 100})).text == "5050.0"
        assert "is 3." in (await names["everything_get-sum"].invoke({"a": 1, "b": 2})).text
        assert (await group["demo"].read_resource("demo://greeting")).text == "hello from demo"


async def test_a_failing_server_in_a_config_stops_the_others(tmp_path: Path) -> None:
    config = {
        "mcpServers": {
            "demo": {"command": sys.executable, "args": [str(DEMO)]},
            "broken": {"command": "/nonexistent/server"},
        }
    }
    group = MCPToolset.from_config(config)
    with pytest.raises(MCPError, match="cannot connect to MCP server broken: command not found"):
        await group.connect()


async def test_a_restarted_everything_server_gets_a_new_session(everything: list[str]) -> None:
    port = free_port()
    env = {"PATH": "/usr/bin:/bin", "PORT": str(port)}
    toolset = MCPToolset.http(f"http://127.0.0.1:{port}/mcp", name="everything")
    async with serving([*everything, "streamableHttp"], port, env=env):
        await toolset.connect()
        assert "is 3." in (await toolset.call_tool("get-sum", {"a": 1, "b": 2})).text
    try:
        # The new process answers our old session id with "No valid session ID provided".
        async with serving([*everything, "streamableHttp"], port, env=env):
            assert "is 5." in (await toolset.call_tool("get-sum", {"a": 2, "b": 3})).text
    finally:
        await toolset.aclose()
