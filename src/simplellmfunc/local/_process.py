"""A model server as a child process: started, awaited until healthy, always stopped."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx

from ..exceptions import LocalServerExitedError

__all__ = ["HINT", "exit_message", "free_port", "serve", "tail"]

HINT = (
    "Try: `rm -rf .cache/llama-server` (or the cache folder `simplellmfunc local status` names) "
    "and run again (the server is rebuilt for this CPU); if that does not help, run the command "
    "above by hand and read its output."
)


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Exec ``argv[2:]`` after asking the kernel for SIGTERM when the parent dies (Linux prctl
# PR_SET_PDEATHSIG, which survives exec); if the parent is already gone, exit instead.
_PDEATHSIG = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)\n"
    "if os.getppid() != int(sys.argv[1]): sys.exit(1)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def _with_parent_death_signal(command: Sequence[str]) -> list[str]:
    if not sys.platform.startswith("linux"):
        return list(command)
    return [sys.executable, "-I", "-S", "-c", _PDEATHSIG, str(os.getpid()), *command]


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of a text file, indented (empty if it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def exit_message(command: Sequence[str], code: int | None, log: Path) -> str:
    """What to tell a user whose server exited during start-up."""
    how = f"was killed by signal {-code}" if code is not None and code < 0 else f"exited ({code})"
    return (
        f"{Path(command[0]).name} {how} during start-up. The last lines of its log ({log}):\n"
        f"{tail(log) or '    (empty)'}\n  command: {' '.join(command)}\n{HINT}"
    )


@asynccontextmanager
async def serve(
    command: Sequence[str],
    health_url: str,
    startup_timeout: float,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> AsyncIterator[None]:
    """Run a server process until the block ends; ready once ``health_url`` answers 2xx.

    The process gets its own session and no ``*_API_KEY`` variables; its output goes to ``log``
    (default: ``<cache>/logs/<program>-<pid>.log``). It is terminated (then killed) afterwards,
    shielded from cancellation. On Linux it also gets SIGTERM when this process dies without
    cleaning up (SIGKILL), so a killed demo or test leaves no server behind.

    Raises:
        LocalServerExitedError: If it exits before answering (the message quotes its log).
    """
    if log is None:
        from ._models import cache_dir

        log = cache_dir() / "logs" / f"{Path(command[0]).name}-{os.getpid()}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    base_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with log.open("wb") as sink:
        process = await anyio.open_process(
            _with_parent_death_signal(command),
            stdin=subprocess.DEVNULL,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**base_env, **(env or {})},
            start_new_session=True,
        )
    try:
        async with httpx.AsyncClient() as client:
            with anyio.fail_after(startup_timeout):
                while True:
                    try:
                        if (await client.get(health_url)).is_success:
                            break
                    except httpx.TransportError:
                        pass
                    if process.returncode is not None:
                        message = exit_message(command, process.returncode, log)
                        raise LocalServerExitedError(message)
                    await anyio.sleep(0.25)
        yield
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                try:
                    process.terminate()
                except ProcessLookupError:
                    pass  # it exited between the check and the signal
                with anyio.move_on_after(10):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()
