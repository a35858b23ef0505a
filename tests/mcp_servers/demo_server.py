"""A small MCP server for tests and benchmarks, written with the official ``mcp`` SDK.

Run over stdio (default) or streamable HTTP on 127.0.0.1::

    python tests/mcp_servers/demo_server.py [--http PORT] [--marker-dir DIR]

``--marker-dir`` makes ``slow`` write ``<dir>/cancelled-<tag>`` when the client cancels it,
so tests can check that our abort reached the server.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

_MARKERS: Path | None = None


def _png(width: int = 2, height: int = 2) -> bytes:
    """A tiny valid red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


server = MCPServer(
    "demo", instructions="A demo server for simplellmfunc tests.", log_level="WARNING"
)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def get_sum(numbers: list[float] | None = None, n: int | None = None) -> float:
    """Sum a list of numbers, or the integers 1..n when `n` is given."""
    if n is not None:
        return float(n * (n + 1) // 2)
    return float(sum(numbers or []))


@server.tool()
def image() -> Image:
    """Return a small PNG image."""
    return Image(data=_png(), format="png")


@server.tool()
def fail(message: str = "boom") -> str:
    """Always fail with `message`."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float = 30.0, tag: str = "slow") -> str:
    """Sleep for `seconds`; records a marker file when cancelled."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        if _MARKERS is not None:
            (_MARKERS / f"cancelled-{tag}").write_text("cancelled")
        raise
    return f"slept {seconds}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report `steps` progress notifications, then finish."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"done {steps}"


@server.tool()
def env(name: str) -> str:
    """Return the value of environment variable `name`, or '<unset>'."""
    return os.environ.get(name, "<unset>")


@server.tool()
def pid() -> int:
    """Return the server's process id."""
    return os.getpid()


@server.tool()
def spawn() -> int:
    """Start a long-lived child process in the server's process group; return its pid."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return child.pid


@server.tool()
def shout(text: str) -> str:
    """Write `text` to the server's stderr."""
    print(text, file=sys.stderr, flush=True)
    return "ok"


@server.tool()
def crash() -> str:
    """Exit the server process immediately (tests crash recovery)."""
    os._exit(3)


@server.tool()
def crash_once(tag: str) -> str:
    """Exit the server process on the first call with `tag` (a marker file remembers it), answer
    'survived' on the next (tests call retries; needs --marker-dir)."""
    assert _MARKERS is not None, "crash_once needs --marker-dir"
    marker = _MARKERS / f"crashed-{tag}"
    if not marker.exists():
        marker.write_text("1")
        os._exit(3)
    return "survived"


@server.tool(structured_output=False)
def mixed() -> list[Any]:
    """Return text and an image in one result."""
    return ["a picture:", Image(data=_png(), format="png")]


@server.tool()
async def garbage(ctx: Context) -> str:
    """Write a non-JSON line and a malformed response to this request (stdio only)."""
    bad = json.dumps({"jsonrpc": "2.0", "id": ctx.request_id, "result": "not an object"})
    os.write(_wire_fd(), b"this line is not JSON\n" + bad.encode() + b"\n")
    return "late answer"


def _wire_fd() -> int:
    # The SDK moves the protocol stream off fd 1 so stray prints cannot corrupt it; this test
    # tool corrupts it on purpose, through the SDK's record of where the stream went.
    from mcp.server import stdio

    claim = stdio._claims.get(1)
    return claim.private_fd if claim is not None and claim.private_fd is not None else 1


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Register a new tool `multiply` and tell the client the tool list changed."""
    if "multiply" not in {t.name for t in await server.list_tools()}:
        server.add_tool(_multiply, name="multiply")
    await ctx.request_context.session.send_tool_list_changed()
    await ctx.notify_tools_changed()
    return "added"


def _multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@server.resource("demo://greeting", mime_type="text/plain")
def greeting() -> str:
    """A greeting."""
    return "hello from demo"


@server.resource("demo://pixel", mime_type="image/png")
def pixel() -> bytes:
    """A one-pixel image."""
    return _png(1, 1)


@server.prompt()
def summarize(topic: str) -> str:
    """Ask for a summary of `topic`."""
    return f"Please summarize {topic} in one sentence."


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    parser.add_argument("--marker-dir", default=None)
    args = parser.parse_args()
    global _MARKERS
    _MARKERS = Path(args.marker_dir) if args.marker_dir else None
    if args.http is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=args.http)


if __name__ == "__main__":
    main()
