"""serve_mcp round trips: our tools behind an MCP server, used through our own MCPToolset.

The server is ``simplellmfunc.mcp_server``; ``simplellmfunc.mcp`` still forwards ``serve_mcp``,
``build_server`` and ``python -m simplellmfunc.mcp`` to it for compatibility.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import simplellmfunc
import simplellmfunc.mcp as client_pkg
import simplellmfunc.mcp_server as server_pkg
from mcp_servers.support import CHECKOUT_ENV, SERVED, children, free_port, serving, wait_gone
from simplellmfunc import AbortSignal, tool
from simplellmfunc.exceptions import AbortedError, MCPError, ToolDefinitionError
from simplellmfunc.mcp import MCPToolset
from simplellmfunc.mcp.__main__ import main as old_cli_main
from simplellmfunc.mcp_server import build_server
from simplellmfunc.mcp_server.__main__ import main as cli_main
from simplellmfunc.tools import Tool, ToolContext, ToolEventEmitter


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = children()
    yield
    assert not wait_gone(sorted(children() - before)), "a server process outlived its test"


@asynccontextmanager
async def served(kind: str, tmp_path: Path) -> AsyncIterator[MCPToolset]:
    """served_tools.py over stdio, or over HTTP on 127.0.0.1."""
    if kind == "stdio":
        async with MCPToolset.stdio(
            sys.executable, [str(SERVED)], CHECKOUT_ENV, name="served"
        ) as toolset:
            yield toolset
        return
    port = free_port()
    argv = [sys.executable, str(SERVED), "--http", str(port)]
    async with (
        serving(argv, port),
        MCPToolset.http(f"http://127.0.0.1:{port}/mcp", name="served") as toolset,
    ):
        yield toolset


async def by_name(toolset: MCPToolset) -> dict[str, Tool]:
    return {t.name: t for t in await toolset.list_tools()}


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_our_tools_round_trip(kind: str, tmp_path: Path) -> None:
    async with served(kind, tmp_path) as toolset:
        tools = await by_name(toolset)
        assert set(tools) == {"add", "chatty", "picture", "broken", "wait"}
        assert tools["add"].parameters["required"] == ["a", "b"]
        assert tools["add"].parameters["properties"]["a"]["description"] == "The first."
        assert (await tools["add"].invoke({"a": 2, "b": 40})).text == "42"
        text, images = tools["picture"].render(await tools["picture"].invoke({}))
        assert text == "a red square"
        assert images[0].url.startswith("data:image/png;base64,")
        with pytest.raises(MCPError, match="RuntimeError: served tool failed"):
            await tools["broken"].invoke({})


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_custom_events_come_back_as_progress(kind: str, tmp_path: Path) -> None:
    async with served(kind, tmp_path) as toolset:
        chatty = (await by_name(toolset))["chatty"]
        emitter = ToolEventEmitter(tool_name="chatty", tool_call_id="c9")
        result = await chatty.invoke({"steps": 3}, ToolContext("c9", "chatty", emitter))
        assert result.text == "emitted 3"
        events = [e.event for e in await emitter.get_events()]
        assert sorted(e.data["message"] for e in events) == [
            'tick: {"i": 0}',
            'tick: {"i": 1}',
            'tick: {"i": 2}',
        ]
        assert {e.tool_call_id for e in events} == {"c9"}


async def test_abort_reaches_a_served_tool(tmp_path: Path) -> None:
    async with served("stdio", tmp_path) as toolset:
        wait = (await by_name(toolset))["wait"]
        signal = AbortSignal()
        signal.abort("never mind")
        with pytest.raises(AbortedError):
            await wait.invoke(
                {"seconds": 30}, ToolContext("c1", "wait", ToolEventEmitter(), signal)
            )
        assert (await toolset.call_tool("add", {"a": 1, "b": 1})).text == "2"


def test_build_server_rejects_what_it_cannot_serve() -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    def pong() -> str:
        """Answer ping."""
        return "ping"

    assert build_server([ping, [pong]], name="x").name == "x"
    with pytest.raises(ToolDefinitionError, match="two served tools are named 'ping'"):
        build_server([ping, ping.func])
    with pytest.raises(ToolDefinitionError, match="cannot serve 42"):
        build_server([42])


def test_server_surface_is_sorted_and_importable() -> None:
    assert server_pkg.__all__ == sorted(server_pkg.__all__)
    for name in server_pkg.__all__:
        assert getattr(server_pkg, name) is not None


def test_client_forwards_the_server_names_for_compatibility() -> None:
    assert client_pkg.serve_mcp is server_pkg.serve_mcp
    assert client_pkg.build_server is server_pkg.build_server
    assert {"build_server", "serve_mcp"} <= set(dir(client_pkg))


def test_the_client_does_not_import_the_server() -> None:
    code = (
        "import sys, simplellmfunc.mcp\n"
        "loaded = [m for m in sys.modules if m.startswith(('simplellmfunc.mcp_server', "
        "'simplellmfunc.builtin'))]\n"
        "assert not loaded, loaded\n"
    )
    env = {**os.environ, **CHECKOUT_ENV}
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=60)


@pytest.mark.parametrize("main", [cli_main, old_cli_main], ids=["mcp_server", "mcp"])
def test_cli_needs_a_toolset(
    main: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve"]) == 2
    assert "give --pyrepl and/or --files" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["simplellmfunc.mcp_server", "simplellmfunc.mcp"])
async def test_cli_serves_file_tools(module: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    args = ["-m", module, "serve", "--files", str(tmp_path)]
    async with MCPToolset.stdio(
        sys.executable, args, CHECKOUT_ENV, name="files", timeout=60
    ) as toolset:
        tools = await by_name(toolset)
        assert {"read_file", "read_image", "grep", "sed", "echo_into"} <= set(tools)
        text = (await tools["read_file"].invoke({"path": "notes.txt"})).text
        assert "1 | first line" in text
        found = (await tools["grep"].invoke({"pattern": "second"})).text
        assert "notes.txt" in found


async def test_cli_serves_pyrepl_with_output_events(tmp_path: Path) -> None:
    args = ["-m", "simplellmfunc.mcp_server", "serve", "--pyrepl", "--files", str(tmp_path)]
    async with MCPToolset.stdio(
        sys.executable, args, CHECKOUT_ENV, name="repl", timeout=120, connect_timeout=120
    ) as toolset:
        tools = await by_name(toolset)
        assert {"execute_code", "reset_repl", "list_variables", "read_file"} <= set(tools)
        emitter = ToolEventEmitter(tool_name="execute_code", tool_call_id="k1")
        code = {"code": "x = 6 * 7\nprint(x)"}
        result = await tools["execute_code"].invoke(
            code, ToolContext("k1", "execute_code", emitter)
        )
        assert "42" in result.text
        events = [e.event for e in await emitter.get_events()]
        assert any("42" in str(e.data.get("message")) for e in events)
        # A run that raised is an error result (isError), with the kernel's report.
        with pytest.raises(MCPError, match="ZeroDivisionError"):
            await tools["execute_code"].invoke({"code": "1 / 0"})
        assert toolset.server_info is not None
        assert toolset.server_info.version == simplellmfunc.__version__
        assert "x" in (await tools["list_variables"].invoke({})).text


@tool
def secret_count() -> int:
    """A tool a web page must never be able to call."""
    return 7


_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "page", "version": "0"},
    },
}
_MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_the_http_server_refuses_browsers_foreign_hosts_and_missing_tokens() -> None:
    import httpx

    from simplellmfunc.mcp_server import mcp_http_app
    from simplellmfunc.serving import Principals, running

    principals = Principals.single("s3cret-token")
    app = mcp_http_app([secret_count], principals=principals)
    async with running(lambda _url: app) as base, httpx.AsyncClient(base_url=base) as client:
        url, auth = "/mcp", {"Authorization": "Bearer s3cret-token", **_MCP_ACCEPT}
        # A DNS-rebinding page: its own name in Host.
        rebound = await client.post(url, json=_INIT, headers={**auth, "Host": "evil.example"})
        assert rebound.status_code == 421
        # A cross-site page: a form post (no preflight) and a fetch with its Origin.
        form = await client.post(url, content=b"{}", headers={**auth, "Content-Type": "text/plain"})
        assert form.status_code == 415
        fetch = await client.post(
            url, json=_INIT, headers={**auth, "Origin": "https://evil.example"}
        )
        assert fetch.status_code == 403
        assert (await client.post(url, json=_INIT, headers=_MCP_ACCEPT)).status_code == 401
        deep = b"[" * 200 + b"]" * 200
        huge = await client.post(
            url, content=deep, headers={**auth, "Content-Type": "application/json"}
        )
        assert huge.status_code == 400  # nested past the JSON depth limit
        async with MCPToolset.http(
            f"{base}/mcp", headers={"Authorization": "Bearer s3cret-token"}, name="guarded"
        ) as toolset:
            tools = await by_name(toolset)
            assert (await tools["secret_count"].invoke({})).text == "7"


def test_an_http_server_off_loopback_needs_a_token_and_its_host_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from simplellmfunc.exceptions import UserError
    from simplellmfunc.mcp_server import mcp_http_app
    from simplellmfunc.serving import Principals

    with pytest.raises(UserError, match="needs a token"):
        mcp_http_app([secret_count], host="0.0.0.0", allowed_hosts=["tools.internal"])
    with pytest.raises(UserError, match="allowed-host"):
        mcp_http_app([secret_count], host="0.0.0.0", principals=Principals.single("t"))
    guarded = mcp_http_app(
        [secret_count], host="0.0.0.0", principals=Principals.single("t"), allowed_hosts=["a.b"]
    )
    assert guarded.policy.allowed_hosts == {"a.b"}
    # The command line says so in one line, without a traceback, and takes no token on argv.
    monkeypatch.delenv(server_pkg.MCP_TOKEN_ENV, raising=False)
    argv = ["serve", "--files", ".", "--http", "0", "--host", "0.0.0.0", "--allowed-host", "x"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert "needs a token" in err
    assert "Traceback" not in err
