"""Running a shell command for a tool: its own process group, a wall-clock timeout, capped output.

:func:`run_command` runs ``/bin/sh -c command`` in a new session (a process group of its own).
When the ``timeout`` passes, or the call is cancelled (an abort, the run's tool timeout), the
whole group is killed (SIGTERM, then SIGKILL after ``kill_grace`` seconds), so children the
command started die too; when the command exits, what it left running in its group is killed.
stdout and stderr are each capped (the rest is read and dropped, so a chatty command never
blocks on a full pipe).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from ...exceptions import ToolExecutionError
from ...sandbox import (
    SandboxPolicy,
    clean_environment,
    kill_spawned,
    marker_entry,
    sandbox_argv,
    usable,
)

__all__ = ["CommandOutput", "check_output", "run_command", "with_note"]

_SHELL = "/bin/sh"
_TAIL_CHARS = 2000  # end of stderr shown with a failure
_CLEANUP_SECONDS = 10.0  # bound on the shielded kill-and-reap after the command


@dataclass(frozen=True, slots=True)
class CommandOutput:
    """What a finished (or killed) command produced.

    Attributes:
        returncode: The exit status (negative: killed by that signal).
        stdout: Standard output, decoded as UTF-8 (invalid bytes replaced), cut at the cap.
        stderr: Standard error, likewise.
        stdout_dropped: Bytes of stdout beyond the cap.
        stderr_dropped: Bytes of stderr beyond the cap.
        timed_out: Whether the timeout killed the command.
    """

    returncode: int
    stdout: str
    stderr: str
    stdout_dropped: int = 0
    stderr_dropped: int = 0
    timed_out: bool = False

    def stdout_text(self) -> str:
        """stdout with a note when it was cut."""
        return with_note(self.stdout, self.stdout_dropped)


def with_note(text: str, dropped: int) -> str:
    return f"{text}\n[... {dropped} more bytes of output cut]" if dropped else text


class _Capped:
    """The first ``limit`` bytes of a stream, and a count of the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _drain(stream: ByteReceiveStream | None, sink: _Capped) -> None:
    if stream is None:
        return
    async for chunk in stream:
        sink.add(chunk)


async def _feed(stream: ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        if data:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the command exited without reading all of its input: its business
    finally:
        await stream.aclose()


async def _open(
    argv: list[str],
    with_stdin: bool,
    cwd: str | os.PathLike[str] | None,
    env: dict[str, str] | None,
) -> Process:
    return await anyio.open_process(
        argv,
        stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )


def _signal_group(process: Process, sig: signal.Signals) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


async def _stop(process: Process, kill_grace: float) -> None:
    """Kill the command's process group (gently first if the command still runs) and reap it."""
    if process.returncode is None:
        _signal_group(process, signal.SIGTERM)
        with anyio.move_on_after(kill_grace):
            await process.wait()
    _signal_group(process, signal.SIGKILL)  # the command, if it ignored SIGTERM, and leftovers
    await process.wait()
    await process.aclose()


async def run_command(
    command: str,
    *,
    stdin: str | None = None,
    timeout: float | None = None,
    max_output_chars: int = 20_000,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    kill_grace: float = 2.0,
    sandbox: SandboxPolicy | None = None,
) -> CommandOutput:
    """Run ``/bin/sh -c command`` in its own process group and collect its output.

    With a ``sandbox`` policy the shell runs in a sandbox (bubblewrap where it runs): ``cwd``
    (default: a fresh private directory) is its workspace, the environment is the policy's clean
    one plus ``env``, and the policy's ``timeout_seconds`` caps ``timeout``.

    Args:
        command: The shell command line.
        stdin: Text for the command's stdin (``None``: no input, stdin is ``/dev/null``).
        timeout: Wall-clock seconds before the group is killed (``None``: no limit).
        max_output_chars: Bytes kept of stdout and of stderr, each.
        cwd: Working directory.
        env: Extra environment variables (on top of this process's environment).
        kill_grace: Seconds between SIGTERM and SIGKILL.
        sandbox: The sandbox policy (None: the command runs as this process's user).

    Returns:
        The output; ``timed_out`` is set when the timeout killed the command.

    Raises:
        ToolExecutionError: If the command cannot be started (missing ``cwd``, no shell).
    """
    if sandbox is not None:
        async with _sandboxed(sandbox, cwd) as workspace:
            timeout = _shorter(timeout, sandbox.timeout_seconds)
            if sandbox.max_output_bytes is not None:
                max_output_chars = min(max_output_chars, sandbox.max_output_bytes)
            isolated = await anyio.to_thread.run_sync(usable, sandbox, "command")
            # The launcher stays the shell's parent and kills what the command leaves, so a
            # detached or background child neither outlives it nor holds its output open.
            argv = sandbox_argv(sandbox, [_SHELL, "-c", command], workspace=workspace,
                                isolated=isolated, supervise=True)  # fmt: skip
            token = f"slf-shell-{os.getpid()}-{id(workspace)}-{time.monotonic_ns()}"
            environment = {**clean_environment(sandbox.env), "HOME": workspace, **(env or {})}
            environment.update(marker_entry(token))
            try:
                return await _run(argv, stdin, timeout, max_output_chars, workspace,
                                  environment, kill_grace)  # fmt: skip
            finally:
                # Without bubblewrap, a last sweep: what carries the marker.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(kill_spawned, None, token)
    host = {**os.environ, **env} if env else None
    argv = [_SHELL, "-c", command]
    return await _run(argv, stdin, timeout, max_output_chars, cwd, host, kill_grace)


def _shorter(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


@asynccontextmanager
async def _sandboxed(
    policy: SandboxPolicy, cwd: str | os.PathLike[str] | None
) -> AsyncIterator[str]:
    """The sandbox's workspace: ``cwd``, or a private directory removed afterwards."""
    if cwd is not None:
        yield os.fspath(cwd)  # absolute: ShellTool and CLIAgentTool make it so
        return
    private = await anyio.to_thread.run_sync(tempfile.mkdtemp, None, "slf-shell-")
    try:
        yield private
    finally:
        await anyio.to_thread.run_sync(shutil.rmtree, private, True)


async def _run(
    argv: list[str],
    stdin: str | None,
    timeout: float | None,
    max_output_chars: int,
    cwd: str | os.PathLike[str] | None,
    environment: dict[str, str] | None,
    kill_grace: float,
) -> CommandOutput:
    out, err = _Capped(max_output_chars), _Capped(max_output_chars)
    try:
        # Shielded: a cancellation while the child is being set up would lose the process
        # object, and with it the only way to kill the group; it lands inside the try below.
        with anyio.CancelScope(shield=True):
            process = await _open(argv, stdin is not None, cwd, environment)
    except OSError as exc:
        raise ToolExecutionError(f"cannot start the command: {exc.strerror or exc}") from None
    timed_out = False
    try:
        with anyio.move_on_after(timeout) as deadline:
            async with anyio.create_task_group() as group:
                group.start_soon(_drain, process.stdout, out)
                group.start_soon(_drain, process.stderr, err)
                if stdin is not None:
                    group.start_soon(_feed, process.stdin, stdin.encode())
                await process.wait()
                # Whatever the command left running in its group would hold the pipes open.
                _signal_group(process, signal.SIGKILL)
        timed_out = deadline.cancelled_caught
    finally:
        with anyio.move_on_after(_CLEANUP_SECONDS + kill_grace, shield=True):
            await _stop(process, kill_grace)
    code = process.returncode if process.returncode is not None else -signal.SIGKILL
    return CommandOutput(code, out.text(), err.text(), out.dropped, err.dropped, timed_out)


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _TAIL_CHARS else "…" + text[-_TAIL_CHARS:]


def check_output(output: CommandOutput, timeout: float | None) -> None:
    """Raise the model-facing error of a failed command.

    Raises:
        ToolExecutionError: On a timeout or a non-zero exit status.
    """
    if output.timed_out:
        partial = _tail(output.stdout)
        detail = f"; output so far:\n{partial}" if partial else ""
        raise ToolExecutionError(
            f"the command timed out after {timeout:g} seconds and was killed{detail}"
        )
    if output.returncode != 0:
        detail = _tail(output.stderr) or _tail(output.stdout) or "no output"
        raise ToolExecutionError(f"the command exited with status {output.returncode}: {detail}")
