"""A pids cgroup per sandbox, where ``RLIMIT_NPROC`` cannot bound it: when the host is root.

Linux never enforces ``RLIMIT_NPROC`` for processes whose real uid is the host's root, and a user
namespace does not change that (the uid inside maps to root outside). So as root, each sandbox
gets a cgroup of the pids controller (``slf-<n>`` under this process's own, cgroup v1 or v2)
with ``pids.max`` set, which the sandbox's first process joins before it ``exec``s bubblewrap
(a ``/bin/sh`` prefix). Cgroups left empty by ended sandboxes are removed by a later start
(``rmdir`` refuses a cgroup that still holds a process; one younger than a minute may be about
to get its process, and is left; so are other live processes' cgroups).
Where no pids controller is writable, :func:`available` is False and the sandbox says so.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import threading
import time

__all__ = ["available", "join_argv"]

_PREFIX = "slf-"
_COUNTER = itertools.count()
# The tasks a sandbox needs besides the code's own: sh/bwrap, bwrap's init in the PID
# namespace, the command itself.
_OVERHEAD = 3
_SETTLE_SECONDS = 60.0
_OURS: dict[str, float] = {}  # cgroup path -> when this process created it
_LOCK = threading.Lock()


def _own_root() -> str | None:
    """This process's cgroup of the pids controller, if it is writable."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            root = "/sys/fs/cgroup/pids" + path
        elif controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
            root = "/sys/fs/cgroup" + path
        else:
            continue
        if os.access(root, os.W_OK) and _works(root):
            return root.rstrip("/")
    return None


def _works(root: str) -> bool:
    probe = os.path.join(root, f"{_PREFIX}probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(probe, "pids.max"))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


@functools.cache
def _root() -> str | None:
    return _own_root() if os.geteuid() == 0 else None


def available() -> bool:
    """Whether sandboxes here get a pids cgroup (as root, with a writable pids controller)."""
    return _root() is not None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _sweep(root: str) -> None:
    now = time.monotonic()
    with contextlib.suppress(OSError), os.scandir(root) as entries:
        for entry in entries:
            name = entry.name
            if not name.startswith(_PREFIX) or not entry.is_dir(follow_symlinks=False):
                continue
            _sweep(entry.path)  # a sandbox's own cgroups first (nested: a fallback that nests)
            owner = name[len(_PREFIX) :].split("-")[0]
            with _LOCK:
                created = _OURS.get(entry.path)
            if created is not None:
                if now - created < _SETTLE_SECONDS:
                    continue
            elif not owner.isdigit() or _alive(int(owner)):
                continue
            with contextlib.suppress(OSError):
                os.rmdir(entry.path)  # refused while a process is in it
                with _LOCK:
                    _OURS.pop(entry.path, None)


def join_argv(max_processes: int, argv: list[str]) -> list[str]:
    """``argv`` run inside a new pids cgroup capped at ``max_processes`` (unchanged: none here)."""
    root = _root()
    if root is None:
        return argv
    _sweep(root)
    group = os.path.join(root, f"{_PREFIX}{os.getpid()}-{next(_COUNTER)}")
    try:
        os.mkdir(group)
        with open(os.path.join(group, "pids.max"), "w", encoding="ascii") as handle:
            handle.write(str(max_processes + _OVERHEAD))
    except OSError:
        return argv
    with _LOCK:
        _OURS[group] = time.monotonic()
    procs = os.path.join(group, "cgroup.procs")
    join = 'echo $$ > "$0" || exit 126; exec "$@"'
    return ["/bin/sh", "-c", join, procs, *argv]
