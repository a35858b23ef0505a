"""Helpers for the MCP tests: server scripts, ports, HTTP servers and process checks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process

HERE = Path(__file__).resolve().parent
DEMO = HERE / "demo_server.py"
PAGED = HERE / "paged_server.py"
SERVED = HERE / "served_tools.py"
LOCALHOST_ONLY = HERE / "localhost_only.cjs"

#: For a stdio server that imports simplellmfunc: it gets only an allowlisted environment, and
#: would otherwise import whatever copy the virtualenv has installed (another worktree's, for
#: example) instead of the source under test.
CHECKOUT_ENV = {"PYTHONPATH": str(HERE.parents[1] / "src")}

#: Pids of servers that fixtures keep running across tests (not orphans).
FIXTURE_SERVERS: set[int] = set()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


@contextmanager
def http_server(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run a server process listening on ``port``; stop it (and its group) afterwards."""
    process = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    FIXTURE_SERVERS.add(process.pid)
    try:
        wait_for_port(port, process)
        yield process
    finally:
        stop(process)
        FIXTURE_SERVERS.discard(process.pid)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server started by :func:`http_server` and everything it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(5)
            break
        except subprocess.TimeoutExpired:
            continue


def demo_http(port: int, marker_dir: Path) -> list[str]:
    """The command line of the demo server over HTTP."""
    return [sys.executable, str(DEMO), "--http", str(port), "--marker-dir", str(marker_dir)]


def running(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids: Sequence[int], timeout: float = 10.0) -> list[int]:
    """Wait until none of ``pids`` runs; return those still running."""
    deadline = time.monotonic() + timeout
    alive = [pid for pid in pids if running(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [pid for pid in alive if running(pid)]
    return alive


def children() -> set[int]:
    """Pids of this process's live descendants."""
    try:
        found = psutil.Process().children(recursive=True)
    except psutil.Error:
        return set()
    return {p.pid for p in found if running(p.pid)}


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = 10.0) -> bool:
    """Poll ``check`` until it holds (True) or ``seconds`` pass (False)."""
    with anyio.move_on_after(seconds):
        while not await check():  # noqa: ASYNC110 - polling outside state, nothing to await
            await anyio.sleep(0.02)
        return True
    return False


@asynccontextmanager
async def serving(
    argv: Sequence[str], port: int, env: Mapping[str, str] | None = None
) -> AsyncIterator[Process]:
    """Like :func:`http_server`, inside a test: start, wait for the port, stop the group."""
    process = await anyio.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )
    try:
        await _port_open(port, process)
        yield process
    finally:
        with anyio.CancelScope(shield=True):
            await kill_group(process)


async def _port_open(port: int, process: Process, timeout: float = 30.0) -> None:
    with anyio.fail_after(timeout):
        while process.returncode is None:
            try:
                stream = await anyio.connect_tcp("127.0.0.1", port)
            except OSError:
                await anyio.sleep(0.05)
                continue
            await stream.aclose()
            return
    raise RuntimeError(f"server exited with {process.returncode} before listening")


async def kill_group(process: Process) -> None:
    """Stop a process started with ``start_new_session`` and everything in its group."""
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.aclose()


async def gone(pids: Sequence[int], seconds: float = 10.0) -> bool:
    """Whether every process in ``pids`` ends within ``seconds`` (the event loop keeps running)."""

    async def check() -> bool:
        return not any(running(pid) for pid in pids)

    return await eventually(check, seconds)
