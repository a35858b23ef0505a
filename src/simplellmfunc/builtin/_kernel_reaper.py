"""Last-resort cleanup: kill every live kernel process group when the interpreter exits.

Sessions register here when their kernel starts and unregister when they shut it down. The
``atexit`` hook is installed on the first registration (never at import time) and works without an
event loop: it signals process groups and removes private directories synchronously.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import threading
from dataclasses import dataclass

__all__ = ["LiveKernel", "kill_group", "register", "unregister"]


@dataclass(frozen=True, slots=True)
class LiveKernel:
    """What is needed to destroy a kernel without its manager."""

    pid: int
    pgid: int | None
    private_dir: str


_LIVE: dict[int, LiveKernel] = {}
_LOCK = threading.Lock()
_HOOKED = [False]


def kill_group(pgid: int | None, pid: int) -> None:
    """SIGKILL the kernel's process group (the kernel and what it spawned); ignore the gone."""
    if not hasattr(signal, "SIGKILL"):
        return
    target_group = pgid is not None and pgid == pid and hasattr(os, "killpg")
    try:
        if target_group:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def register(kernel: LiveKernel) -> None:
    """Track a started kernel (installs the exit hook the first time)."""
    with _LOCK:
        _LIVE[kernel.pid] = kernel
        if not _HOOKED[0]:
            _HOOKED[0] = True
            atexit.register(_reap_all)


def unregister(pid: int) -> None:
    """Forget a kernel that was shut down properly."""
    with _LOCK:
        _LIVE.pop(pid, None)


def live_count() -> int:
    """How many kernels are registered (for tests and diagnostics)."""
    with _LOCK:
        return len(_LIVE)


def _reap_all() -> None:
    with _LOCK:
        kernels = list(_LIVE.values())
        _LIVE.clear()
    for kernel in kernels:
        kill_group(kernel.pgid, kernel.pid)
        try:
            # The kernel is our child: reap it so no zombie outlives the parent's last moments.
            os.waitpid(kernel.pid, 0)
        except (ChildProcessError, OSError):
            pass
        shutil.rmtree(kernel.private_dir, ignore_errors=True)
