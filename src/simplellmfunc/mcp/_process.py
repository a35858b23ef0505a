"""The stdio transport: an MCP server as a child process in its own process group.

The SDK's ``stdio_client`` leaves descendants alive when the server exits on its own and sends
stderr to a file, so on POSIX we own the process: its stderr goes to our log (and its last lines
to a :class:`ServerOutput`, for the error of a server that ends before its session is up), a
malformed line that names a request fails that request, and on close (or cancel, or a failed
connect) the whole process group is terminated. Framing and message types are the SDK's.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sys
from collections import deque
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress

import anyio
import mcp.types as types
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ._config import StdioSpec, child_environment

__all__ = ["ServerOutput", "open_stdio", "parse_line"]

logger = logging.getLogger("simplellmfunc.mcp")
stderr_logger = logging.getLogger("simplellmfunc.mcp.stderr")

_EXIT_GRACE = 2.0  # after stdin closes, as the MCP lifecycle spec suggests
_TERM_GRACE = 2.0  # after SIGTERM, before SIGKILL
_POLL = 0.01
_WATCH_INTERVAL = 0.2
_EOF_GRACE = 0.5  # for the last output of a server that exited
_FLUSH = 0.5
_MAX_LOG_LINE = 2000
_MAX_PARTIAL = 65536
_TAIL_LINES = 20
_TAIL_CHARS = 4096
_REDACTED = "***"
_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')

Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


class ServerOutput:
    """What a stdio server left behind: how it ended on its own, and the tail of its stderr.

    ``exit_code`` is the server's exit status when it ended before we began to stop it
    (negative: killed by that signal), else ``None``. :attr:`stderr_tail` keeps the last
    20 lines, at most 4 KB, with each of ``secrets`` (the values the server was given) replaced
    by ``***``: a server that prints its configuration must not put a token into an error.
    """

    __slots__ = ("_lines", "_secrets", "exit_code")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.exit_code: int | None = None
        self._lines: deque[str] = deque(maxlen=_TAIL_LINES)
        # Longest first, so a secret that contains another is replaced whole.
        self._secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def add(self, line: str) -> None:
        """Keep one line the server wrote to stderr."""
        self._lines.append(line)

    @property
    def stderr_tail(self) -> str:
        """The last lines of stderr (redacted, bounded; whole lines only)."""
        text = "\n".join(self._lines)
        for secret in self._secrets:
            text = text.replace(secret, _REDACTED)
        if len(text) > _TAIL_CHARS:
            text = text[-_TAIL_CHARS:].partition("\n")[2]
        return text


@asynccontextmanager
async def open_stdio(
    spec: StdioSpec, label: str, lost: anyio.Event, output: ServerOutput | None = None
) -> AsyncIterator[Streams]:
    """Start the server and yield the session's (read, write) streams.

    ``lost`` is set when the server exits or stops reading. Leaving the context stops the
    server: stdin is closed, then the process group gets SIGTERM and finally SIGKILL, all
    bounded and shielded from cancellation. ``output`` (if given) receives how the server
    ended, if it ended on its own, and its last stderr lines, once the context is left.

    Raises:
        OSError: The command cannot be started.
    """
    if sys.platform == "win32":  # pragma: no cover - the SDK's Job Objects do the work there
        params = StdioServerParameters(
            command=spec.command, args=list(spec.args), env=child_environment(spec), cwd=spec.cwd
        )
        async with stdio_client(params) as (read, write):
            yield read, write  # type: ignore[misc]
        return
    process = await anyio.open_process(
        [spec.command, *spec.args],
        env=child_environment(spec),
        cwd=spec.cwd,
        start_new_session=True,
    )
    # No await between the spawn and the try: a cancellation there would leak the process.
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    pipes = _Pipes(process, label, lost, read_send, write_recv, output or ServerOutput())
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pipes.read_stdout)
            group.start_soon(pipes.write_stdin)
            group.start_soon(pipes.log_stderr)
            group.start_soon(pipes.watch_exit)
            try:
                yield read_recv, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    write_send.close()
                    with anyio.move_on_after(_FLUSH):
                        await pipes.writer_done.wait()
                    await pipes.note_exit()
                    await stop_process_group(process)
                    with anyio.move_on_after(_EOF_GRACE):
                        await pipes.stderr_done.wait()  # its last words, for the error
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            lost.set()
            for stream in (read_send, read_recv, write_send, write_recv):
                stream.close()
            with anyio.move_on_after(_EXIT_GRACE):
                await process.aclose()


class _Pipes:
    """The tasks that move bytes between the child's pipes and the session's streams."""

    def __init__(
        self,
        process: Process,
        label: str,
        lost: anyio.Event,
        read_send: MemoryObjectSendStream[SessionMessage | Exception],
        write_recv: MemoryObjectReceiveStream[SessionMessage],
        output: ServerOutput,
    ) -> None:
        self.process = process
        self.label = label
        self.lost = lost
        self.read_send = read_send
        self.write_recv = write_recv
        self.output = output
        self.reader_done = anyio.Event()
        self.writer_done = anyio.Event()
        self.stderr_done = anyio.Event()

    async def read_stdout(self) -> None:
        assert self.process.stdout is not None
        try:
            async for line in _lines(self.process.stdout):
                if line.strip():
                    await self.read_send.send(parse_line(line, self.label))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the session or the pipe is closed: the connection is over either way
        finally:
            self.reader_done.set()
            self.lost.set()
            self.read_send.close()

    async def write_stdin(self) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            async for message in self.write_recv:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stdin.send(data.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the session so no request waits forever.
            self.lost.set()
            self.read_send.close()
        finally:
            self.writer_done.set()

    async def log_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for line in _lines(self.process.stderr):
                    text = line.decode("utf-8", "replace").rstrip()[:_MAX_LOG_LINE]
                    if text:
                        stderr_logger.info("[%s] %s", self.label, text)
                        self.output.add(text)
        finally:
            self.stderr_done.set()

    async def note_exit(self) -> None:
        """Record the exit status of a server that ended on its own (before we stop it)."""
        if self.reader_done.is_set():
            # Its stdout closed: it is most likely exiting; give the loop a moment to reap it.
            await _wait_exit(self.process, _EOF_GRACE)
        self.output.exit_code = self.process.returncode

    async def watch_exit(self) -> None:
        """End the session when the server exits, even if a descendant holds stdout open."""
        # Polling: nothing signals the exit without also waiting for the pipes to close.
        while self.process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(_WATCH_INTERVAL)
        with anyio.move_on_after(_EOF_GRACE):
            await self.reader_done.wait()
        if not self.reader_done.is_set():
            logger.warning("MCP server %s exited but its stdout stays open", self.label)
        self.lost.set()
        self.read_send.close()


async def _lines(stream: ByteReceiveStream) -> AsyncIterator[bytes]:
    """Split a byte stream into lines; a very long partial line is flushed as is."""
    pieces: list[bytes] = []
    size = 0
    async for chunk in stream:
        if b"\n" not in chunk:
            pieces.append(chunk)
            size += len(chunk)
            if size > _MAX_PARTIAL and not _may_be_message(pieces[0]):
                yield b"".join(pieces)
                pieces, size = [], 0
            continue
        lines = (b"".join(pieces) + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            yield line
        pieces, size = ([rest], len(rest)) if rest else ([], 0)
    if pieces:
        yield b"".join(pieces)


def _may_be_message(head: bytes) -> bool:
    # JSON-RPC lines can be megabytes (images): only non-JSON noise is flushed early.
    return head.lstrip()[:1] == b"{"


def parse_line(line: bytes, label: str = "server") -> SessionMessage | Exception:
    """One line from the server as a message.

    A line that is no valid message but names the request it answers becomes an error response
    to that request, so only that call fails; any other bad line is logged and returned as the
    exception (the session ignores it).
    """
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        excerpt = line[:200].decode("utf-8", "replace")
        request_id = _answered_id(line)
        if request_id is None:
            logger.warning("MCP server %s wrote a line that is no MCP message: %r", label, excerpt)
            return exc
        logger.warning("MCP server %s sent a malformed response: %r", label, excerpt)
        error = types.ErrorData(
            code=types.PARSE_ERROR, message=f"malformed response from the server: {excerpt}"
        )
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _answered_id(line: bytes) -> int | str | None:
    """The id of the request a malformed response line answers, if it can be told."""
    try:
        data = json.loads(line)
    except ValueError:
        looks_like_response = b'"result"' in line or b'"error"' in line
        match = _ID.search(line) if looks_like_response else None
        data = {"id": json.loads(match.group(1)), "result": None} if match else None
    if not isinstance(data, dict) or "method" in data:
        return None
    if "result" not in data and "error" not in data:
        return None
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    return request_id


async def stop_process_group(process: Process) -> None:
    """Stop the server and everything it started; every wait is bounded.

    The MCP shutdown sequence (close stdin, wait, SIGTERM, SIGKILL), then the same for any
    descendants left in the group after the server itself exited.
    """
    pgid = process.pid  # start_new_session made the server its group's leader
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _wait_exit(process, _EXIT_GRACE):
        _signal_group(pgid, signal.SIGTERM)
        if not await _wait_exit(process, _TERM_GRACE):
            _signal_group(pgid, signal.SIGKILL)
            await _wait_exit(process, _TERM_GRACE)
    if _signal_group(pgid, 0):
        _signal_group(pgid, signal.SIGTERM)
        if not await _wait_group_gone(pgid, _TERM_GRACE):
            _signal_group(pgid, signal.SIGKILL)
            await _wait_group_gone(pgid, _TERM_GRACE)


async def _wait_exit(process: Process, timeout: float) -> bool:
    # Not process.wait(): on asyncio it also waits for pipe EOF, which a descendant can hold.
    with anyio.move_on_after(timeout):
        while process.returncode is None:  # noqa: ASYNC110
            await anyio.sleep(_POLL)
    return process.returncode is not None


async def _wait_group_gone(pgid: int, timeout: float) -> bool:
    with anyio.move_on_after(timeout):
        while _signal_group(pgid, 0):  # noqa: ASYNC110 - a group's end has no event to wait on
            await anyio.sleep(_POLL)
        return True
    return False


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False once the group is gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # an unsignalable member (or a zombie on macOS): not proof it is gone
    return True
