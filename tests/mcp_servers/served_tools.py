"""Our own tools served with ``serve_mcp``, for round-trip tests.

python tests/mcp_servers/served_tools.py [--http PORT]
"""

from __future__ import annotations

import argparse

import anyio

from simplellmfunc import tool
from simplellmfunc._content import ImgUrl
from simplellmfunc.mcp_server import serve_mcp
from simplellmfunc.tools import ToolEventEmitter

# A 2x2 red PNG.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR4nGP4z8AARAwQCgAf7gP9i18U1AAAAABJRU5E"
    "rkJggg=="
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


@tool
async def chatty(steps: int, event_emitter: ToolEventEmitter) -> str:
    """Emit `steps` custom events, then finish."""
    for i in range(steps):
        await event_emitter.emit("tick", {"i": i})
    return f"emitted {steps}"


@tool
def picture() -> tuple[str, list[ImgUrl]]:
    """Return a caption and a small image."""
    return "a red square", [ImgUrl(f"data:image/png;base64,{PNG}")]


@tool
def broken() -> str:
    """Always fail."""
    raise RuntimeError("served tool failed")


@tool
async def wait(seconds: float) -> str:
    """Sleep for `seconds`."""
    await anyio.sleep(seconds)
    return "done"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    options = parser.parse_args()
    toolkit = [add, chatty, picture, broken, wait]
    if options.http is None:
        anyio.run(lambda: serve_mcp(toolkit, name="served"))
    else:
        anyio.run(lambda: serve_mcp(toolkit, name="served", transport="http", port=options.http))
