"""Helpers for the durable tests: child processes running a durable agent."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, Process

from simplellmfunc.testing import RecordedRequest, Reply, ToolCallSpec

CHILD = Path(__file__).resolve().parent / "agent_child.py"
SRC = str(Path(__file__).resolve().parents[2] / "src")
CHILD_ENV = {**os.environ, "PYTHONPATH": SRC}


class Lines:
    """The lines a child prints, read as they come."""

    def __init__(self, stream: ByteReceiveStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def next(self) -> str:
        """The next line (``EOFError`` when the child closed its output)."""
        while b"\n" not in self._buffer:
            try:
                self._buffer += await self._stream.receive()
            except anyio.EndOfStream:
                raise EOFError(self._buffer.decode()) from None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    async def until(self, prefix: str) -> str:
        """Skip lines up to the first one starting with ``prefix``; return it."""
        while True:
            line = await self.next()
            if line.startswith(prefix):
                return line

    async def result(self) -> dict[str, Any]:
        """The child's JSON result line."""
        return dict(json.loads(await self.until("{")))


@asynccontextmanager
async def child(
    mode: str, db_url: str, llm_url: str, work: Path, *extra: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[Process, Lines]]:
    """A child process running ``agent_child.py``; killed (and reaped) on the way out."""
    command: Sequence[str] = [sys.executable, str(CHILD), mode, db_url, llm_url, str(work), *extra]
    errors = (work / f"{mode}-{os.urandom(3).hex()}.err").open("wb")
    process = await anyio.open_process(command, env={**CHILD_ENV, **(env or {})}, stderr=errors)
    try:
        assert process.stdout is not None
        yield process, Lines(process.stdout)
    finally:
        if process.returncode is None:
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()
            await process.aclose()
        errors.close()


def session_reply(tool: str) -> Callable[[RecordedRequest], Reply]:
    """A mock reply for sessions run concurrently: one ``tool`` call with the session's label
    (its first user message), then ``done <label>`` once a tool result is in."""

    def reply(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        label = next(m["content"] for m in messages if m["role"] == "user")
        if any(m["role"] == "tool" for m in messages):
            return Reply.text(f"done {label}")
        return Reply.tool_calls(ToolCallSpec(tool, {"label": label}))

    return reply


def log_lines(work: Path, name: str) -> list[str]:
    """The lines a tool of the child logged (``[]`` if it never ran)."""
    path = work / f"{name}.log"
    return path.read_text().splitlines() if path.exists() else []
