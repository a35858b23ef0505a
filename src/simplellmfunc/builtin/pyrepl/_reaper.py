"""Killing kernels: what they spawned too, and as a last resort when the interpreter exits.

:func:`kill_kernel` kills a kernel's process group and, through ``_procs``, what it spawned and
detached (new sessions, daemons).

Sessions register here when their kernel starts and unregister when they shut it down. The
``atexit`` hook is installed on the first registration (never at import time) and works without an
event loop: it kills kernels (as :func:`kill_kernel`) and removes private directories
synchronously.

A host killed outright (SIGKILL, SIGTERM) runs no exit hook: its kernels notice and exit on their
own (ipykernel watches its parent), but their private directories stay. Each private directory
records its owner's pid, and the first directory a process creates sweeps those of dead owners.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import threading
from dataclasses import dataclass

from ...sandbox import kill_spawned

__all__ = ["LiveKernel", "kill_kernel", "make_private_dir", "register", "unregister"]

PREFIXES = ("slf-kernel-", "slf-bridge-")
_OWNER = "owner.pid"


@dataclass(frozen=True, slots=True)
class LiveKernel:
    """What is needed to destroy a kernel without its manager."""

    pid: int
    pgid: int | None
    private_dir: str


_LIVE: dict[int, LiveKernel] = {}
_LOCK = threading.Lock()
_HOOKED = [False]
_SWEPT = [False]


def kill_kernel(kernel: LiveKernel) -> None:
    """SIGKILL the kernel's process group and every process it spawned, detached ones included.

    Blocking (it reads ``/proc``): call from a worker thread.
    """
    token = os.path.basename(kernel.private_dir)
    kill_spawned(kernel.pid, token, lambda: kill_group(kernel.pgid, kernel.pid))


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


# A Unix socket path holds at most 107 bytes; the kernel's sockets are ``<dir>/ipc-<n>``.
_SOCKET_PATH_MAX = 107
_SOCKET_NAME_ROOM = len("/slf-kernel-XXXXXXXX/ipc-NNNNN")


def _private_root() -> str:
    """The temp folder for private dirs: ``$TMPDIR`` unless its path is too long for sockets."""
    root = tempfile.gettempdir()
    too_long = len(os.fsencode(root)) + _SOCKET_NAME_ROOM > _SOCKET_PATH_MAX
    if too_long and os.path.isdir("/tmp") and os.access("/tmp", os.W_OK | os.X_OK):
        return "/tmp"
    return root


def make_private_dir(prefix: str) -> str:
    """Create a 0700 directory owned by this process (blocking: call from a worker thread)."""
    root = _private_root()
    with _LOCK:
        sweep, _SWEPT[0] = not _SWEPT[0], True
    if sweep:
        _sweep_stale(root)
    path = tempfile.mkdtemp(prefix=prefix, dir=root)
    with open(os.path.join(path, _OWNER), "w", encoding="ascii") as handle:
        handle.write(str(os.getpid()))
    return path


def _owner_alive(path: str) -> bool:
    try:
        with open(os.path.join(path, _OWNER), encoding="ascii") as handle:
            pid = int(handle.read().strip())
        os.kill(pid, 0)
    except (OSError, ValueError) as exc:
        # No owner file (yet, or an older layout), or another user's live process: keep it.
        return not isinstance(exc, ProcessLookupError)
    return True


def _sweep_stale(root: str) -> None:
    try:
        names = [n for n in os.listdir(root) if n.startswith(PREFIXES)]
    except OSError:
        return
    for name in names:
        path = os.path.join(root, name)
        if not _owner_alive(path):
            shutil.rmtree(path, ignore_errors=True)


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


def reap(pid: int) -> None:
    """Collect a killed kernel child's exit status (no zombie); ignore one already collected."""
    try:
        os.waitpid(pid, 0)
    except (ChildProcessError, OSError):
        pass


def live_count() -> int:
    """How many kernels are registered (for tests and diagnostics)."""
    with _LOCK:
        return len(_LIVE)


def _reap_all() -> None:
    with _LOCK:
        kernels = list(_LIVE.values())
        _LIVE.clear()
    for kernel in kernels:
        kill_kernel(kernel)
        # The kernel is our child: reap it so no zombie outlives the parent's last moments.
        reap(kernel.pid)
        shutil.rmtree(kernel.private_dir, ignore_errors=True)
