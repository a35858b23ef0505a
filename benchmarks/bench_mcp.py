"""MCP benchmark: per-call overhead of MCPToolset against the SDK's own ClientSession.

Both clients talk to the same test server (tests/mcp_servers/demo_server.py), over stdio (each
client starts its own server process) and over streamable HTTP (one server on 127.0.0.1),
calling the same tool in the same run. Rounds alternate between the two so drift hits both;
the figure is the per-call time of the best round (as timeit advises: slower rounds measure
other load on the machine, not the code). Connect time is start (or reach) the server plus the
handshake, then close.

    python benchmarks/bench_mcp.py [--calls 200] [--rounds 7]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from simplellmfunc.mcp import MCPToolset

SERVER = Path(__file__).resolve().parents[1] / "tests" / "mcp_servers" / "demo_server.py"
ARGS = {"a": 1, "b": 2}
TARGET = 1.10


async def per_call(call: Callable[[], Awaitable[object]], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - started) / calls


async def compare(ours: MCPToolset, sdk: Client, calls: int, rounds: int) -> tuple[float, float]:
    tools = {tool.name: tool for tool in await ours.list_tools()}
    add = tools["add"]
    await sdk.list_tools()  # the SDK validates results against listed output schemas

    async def ours_call() -> object:
        return add.render(await add.invoke(ARGS))

    async def sdk_call() -> object:
        return await sdk.session.call_tool("add", ARGS)

    await per_call(ours_call, 20)  # warm up both
    await per_call(sdk_call, 20)
    ours_times: list[float] = []
    sdk_times: list[float] = []
    for index in range(rounds):
        # Alternate which client goes first, so warm-up and drift favour neither.
        order = [(sdk_call, sdk_times), (ours_call, ours_times)]
        for call, times in order if index % 2 else reversed(order):
            times.append(await per_call(call, calls))
    return min(ours_times), min(sdk_times)


async def connect_times(
    make_ours: Callable[[], MCPToolset], make_sdk: Callable[[], Client], rounds: int
) -> tuple[float, float]:
    ours, sdk = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        async with make_sdk():
            sdk.append(time.perf_counter() - started)
        started = time.perf_counter()
        async with make_ours():
            ours.append(time.perf_counter() - started)
    return statistics.median(ours), statistics.median(sdk)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_http(url: str) -> None:
    async with httpx.AsyncClient(timeout=0.5) as client:
        for _ in range(200):
            try:
                await client.get(url)
                return
            except httpx.HTTPError:
                await anyio.sleep(0.1)
    raise RuntimeError(f"the test server at {url} did not start")


async def main(calls: int, rounds: int) -> None:
    rows: list[tuple[str, float, float]] = []
    stdio = StdioServerParameters(command=sys.executable, args=[str(SERVER)])

    def ours_stdio() -> MCPToolset:
        return MCPToolset.stdio(sys.executable, [str(SERVER)])

    def sdk_stdio() -> Client:
        return Client(stdio_client(stdio), cache=None)

    async with ours_stdio() as ours, sdk_stdio() as sdk:
        rows.append(("call, stdio", *await compare(ours, sdk, calls, rounds)))
    rows.append(("connect+close, stdio", *await connect_times(ours_stdio, sdk_stdio, 3)))

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    server = await anyio.open_process(
        [sys.executable, str(SERVER), "--http", str(port)], stderr=subprocess.DEVNULL
    )
    try:
        await wait_for_http(url)
        async with MCPToolset.http(url) as ours, Client(url, cache=None) as sdk:
            rows.append(("call, streamable HTTP", *await compare(ours, sdk, calls, rounds)))
        rows.append(
            (
                "connect+close, HTTP",
                *await connect_times(lambda: MCPToolset.http(url), lambda: Client(url), 5),
            )
        )
    finally:
        server.terminate()
        await server.aclose()
    print_table(rows, calls, rounds)


def print_table(rows: list[tuple[str, float, float]], calls: int, rounds: int) -> None:
    print(f"MCP: best of {rounds} rounds x {calls} calls of tool 'add' (target <= {TARGET}x)")
    print(f"{'case':<24}{'MCPToolset':>14}{'SDK session':>14}{'ratio':>8}")
    for name, ours, sdk in rows:
        unit, scale = ("ms", 1e3) if ours < 1 else ("s", 1.0)
        mark = "" if not name.startswith("call") else ("  ok" if ours / sdk <= TARGET else "  SLOW")
        print(
            f"{name:<24}{ours * scale:>11.3f} {unit}{sdk * scale:>11.3f} {unit}"
            f"{ours / sdk:>7.2f}x{mark}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=21)
    options = parser.parse_args()
    anyio.run(main, options.calls, options.rounds)
