"""Running the real ``simplellmfunc`` command line as a subprocess, for the acceptance tests.

The console script may not be on ``PATH``: commands run as ``python -m simplellmfunc``, with
the interpreter of the tests. The environment is this process's, without any API key or
``SIMPLELLMFUNC_*`` setting of the developer's, plus what a test passes.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

ROOT = Path(__file__).resolve().parents[1]
AGENTS = ROOT / "examples" / "agents"
CLI = (sys.executable, "-m", "simplellmfunc")
CLI_LINE = " ".join(shlex.quote(part) for part in CLI)
GUARD = 120  # seconds: a deadlock guard for one command, never an assertion on speed


@dataclass(frozen=True, slots=True)
class Completed:
    """A finished command."""

    code: int
    stdout: str
    stderr: str


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without keys or settings, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.endswith("_API_KEY")
        and not k.endswith("_BASE_URL")
        and not k.upper().startswith("SIMPLELLMFUNC_")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


async def cli(
    *args: str | Path,
    env: Mapping[str, str],
    cwd: Path,
    stdin: str | None = None,
    guard: float = GUARD,
) -> Completed:
    """Run ``simplellmfunc args...`` to the end."""
    with anyio.fail_after(guard):
        done = await anyio.run_process(
            [*CLI, *map(str, args)],
            input=stdin.encode() if stdin is not None else b"",
            check=False,
            env=dict(env),
            cwd=cwd,
        )
    return Completed(done.returncode, done.stdout.decode(), done.stderr.decode())


async def start_cli(*args: str | Path, env: Mapping[str, str], cwd: Path) -> Process:
    """Start ``simplellmfunc args...`` (stdin closed), for tests that signal it."""
    return await anyio.open_process(
        [*CLI, *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
    )


async def finish(process: Process, guard: float = GUARD) -> Completed:
    """Read everything ``process`` writes and wait for it (killed after ``guard`` seconds)."""
    out, err = bytearray(), bytearray()

    async def drain(stream: object, sink: bytearray) -> None:
        async for chunk in stream:  # type: ignore[attr-defined]
            sink.extend(chunk)

    try:
        with anyio.fail_after(guard):
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
                await process.wait()
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGKILL)
            with anyio.CancelScope(shield=True):
                await process.wait()
        await process.aclose()
    assert process.returncode is not None
    return Completed(process.returncode, out.decode(), err.decode())


async def eventually(check: Callable[[], bool], guard: float = GUARD) -> bool:
    """Poll ``check`` until it holds (``True``) or ``guard`` seconds pass (``False``)."""
    with anyio.move_on_after(guard):
        while True:
            if check():
                return True
            await anyio.sleep(0.02)
    return check()


def read_pid(path: Path) -> int | None:
    """The pid a command wrote to ``path``, once it has."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text else None


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not: it only waits to be reaped)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def agent_file(name: str) -> Path:
    """A shipped example config."""
    return AGENTS / name


def write(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` and return it."""
    path.write_text(text, encoding="utf-8")
    return path


def run_args(config: str | Path, text: str, *options: str) -> Sequence[str]:
    """``run CONFIG TEXT OPTIONS...``."""
    return ["run", str(config), text, *options]
