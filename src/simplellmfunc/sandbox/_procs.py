"""Find and kill every process a kernel spawned, including the ones that left its process group.

Killing the kernel's process group misses what code detached on purpose
(``subprocess.Popen(..., start_new_session=True)``, daemons that fork twice). Two ties find those
on Linux, through ``/proc``:

* **parentage**: the kernel's descendants, whatever their session or group (taken before the
  kernel dies: its orphans are then re-parented and the tie is gone);
* **a marker**: each kernel starts with ``SIMPLELLMFUNC_KERNEL=<token>`` in its environment, and
  what it spawns inherits it, even after the kernel died or the process was re-parented.

A process that both cleared its environment and left the kernel's tree escapes (so does anything
on a platform without ``/proc``); code that must not escape needs a sandbox (a container), not a
REPL. Before a signal is sent, the process is pinned (a pidfd where available) and checked to be
the one found (same start time), so a pid reused in between is never hit. Blocking: call from a
worker thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from collections.abc import Callable

__all__ = ["MARKER", "kill_spawned", "marker_entry"]

#: The environment variable that marks a kernel and what it spawns.
MARKER = "SIMPLELLMFUNC_KERNEL"
_PROC = "/proc"
_ROUNDS = 5


def marker_entry(token: str) -> dict[str, str]:
    """The environment entry that ties processes to the kernel ``token``."""
    return {MARKER: token}


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of ``pid``; None when it is gone, a zombie, or unreadable."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ")".
    fields = data[data.rfind(b")") + 2 :].split()
    try:
        if fields[0] == b"Z":
            return None  # already dead, waiting for its parent: nothing to kill
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _carries(pid: int, entry: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:
        return False
    return environ.startswith(entry) or b"\0" + entry in environ


def _table() -> dict[int, tuple[int, int]]:
    """{pid: (parent pid, start time)} of every visible process."""
    table: dict[int, tuple[int, int]] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir(_PROC):
            if name.isdigit():
                found = _stat(int(name))
                if found is not None:
                    table[int(name)] = found
    return table


def _spawned(root: int | None, token: str) -> dict[int, int]:
    """{pid: start time} of the descendants of ``root`` and of the processes marked ``token``."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    stack = list(children.get(root, [])) if root is not None else []
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    entry = f"{MARKER}={token}\0".encode()
    found.update(pid for pid in table if pid not in found and _carries(pid, entry))
    found -= {os.getpid(), 1}
    return {pid: table[pid][1] for pid in found}


def _kill(pid: int, started: int) -> None:
    """SIGKILL ``pid`` if it is still the process that started at ``started``."""
    pidfd = getattr(os, "pidfd_open", None)
    handle = None
    if pidfd is not None:
        try:
            handle = pidfd(pid)
        except OSError as exc:
            if exc.errno == errno.ESRCH:
                return  # gone
            # No pidfds on this kernel: check and signal by pid (a tiny reuse window remains).
    try:
        now = _stat(pid)
        if now is None or now[1] != started:
            return
        with contextlib.suppress(OSError):
            if handle is not None:
                signal.pidfd_send_signal(handle, signal.SIGKILL)
            else:
                os.kill(pid, signal.SIGKILL)
    finally:
        if handle is not None:
            os.close(handle)


def kill_spawned(root: int | None, token: str, kill_root: Callable[[], None] | None = None) -> int:
    """SIGKILL what kernel ``root`` spawned (and, through ``kill_root``, the kernel itself).

    Args:
        root: The kernel's pid while it may still be running (None: only the marker counts).
        token: The kernel's marker value.
        kill_root: Called (no arguments) after the first scan to kill the kernel's own group.

    Returns:
        How many processes were signalled (for tests and logs).
    """
    if not os.path.isdir(_PROC) or not hasattr(signal, "SIGKILL"):
        if kill_root is not None:
            kill_root()
        return 0
    signalled = 0
    for round_ in range(_ROUNDS):
        targets = _spawned(root, token)
        if round_ == 0 and kill_root is not None:
            kill_root()
        targets.pop(root or -1, None)
        if not targets:
            break
        for pid, started in targets.items():
            _kill(pid, started)
        signalled += len(targets)
    return signalled
