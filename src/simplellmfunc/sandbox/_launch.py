"""The launcher every sandboxed command starts with (run as a script: ``python -I -S`` this file).

``_launch.py LIMITS FILTER SUPERVISE -- argv...``: sets the hard rlimits ``LIMITS``
(``AS=...,NPROC=...``), installs the seccomp filter ``FILTER`` (``base``, ``no-processes`` or
``none``; see ``_seccomp``) and runs ``argv``. With ``SUPERVISE=1`` it stays as ``argv``'s parent, a
child subreaper: whatever ``argv`` detaches (``setsid``, a double fork, ``env -i``) is re-parented
to it, and when ``argv`` exits, everything left is killed before the launcher exits with
``argv``'s status, so nothing outlives a command and nothing holds its pipes open. Otherwise it
``exec``s ``argv``. Standard library only, plus ``_seccomp`` next to it: nothing else of ours is
importable in a sandbox.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys

# Every sandbox start pays this script's imports: `typing`, `contextlib` and `signal` (with
# `enum`) stay out of the path that only execs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import FrameType
    from typing import Any

_PR_SET_CHILD_SUBREAPER = 36
_SIGKILL = 9  # on every Linux architecture


def _seccomp() -> dict[str, Any]:
    """The sibling ``_seccomp`` module's names, run from its file (no package is importable)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_seccomp.py")
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    names: dict[str, Any] = {"__name__": "_slf_seccomp"}
    exec(compile(source, path, "exec"), names)
    return names


def set_limits(spec: str) -> None:
    """Set the hard rlimits of ``spec`` (``NAME=value,...``; CPU's hard limit 2 s above).

    A limit already lower stays (a process cannot raise its hard limits).
    """
    for item in filter(None, spec.split(",")):
        name, value = item.split("=")
        which = getattr(resource, "RLIMIT_" + name)
        ceiling = resource.getrlimit(which)[1]  # never above the limit we were given
        number = int(value)
        hard = number + 2 if name == "CPU" else number
        if ceiling != resource.RLIM_INFINITY:
            number, hard = min(number, ceiling), min(hard, ceiling)
        resource.setrlimit(which, (number, hard))


def _filter(kind: str) -> None:
    if kind == "none":
        return
    seccomp = _seccomp()
    try:
        program = seccomp["build"](no_processes=kind == "no-processes")
    except LookupError:
        return  # a machine without syscall numbers here: Isolation.missing() says so
    try:
        seccomp["install"](program)
    except OSError as exc:
        sys.exit(f"sandbox: the seccomp filter was refused: {exc}")


def _children() -> list[int]:
    me = str(os.getpid()).encode()
    found = []
    names = os.listdir("/proc") if os.path.isdir("/proc") else []
    for name in names:
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    data = handle.read()
            except OSError:
                continue
            if data[data.rfind(b")") + 2 :].split()[1:2] == [me]:
                found.append(int(name))
    return found


def kill_the_rest() -> None:
    """Kill and reap every process left under this subreaper (orphans come back here)."""
    while True:
        for pid in _children():
            try:
                os.kill(pid, _SIGKILL)
            except OSError:
                pass  # gone already
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def become_subreaper() -> None:
    """Make this process the one its descendants' orphans are re-parented to (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    prctl = getattr(libc, "prctl", None)  # Linux only; elsewhere the process group is the tie
    if prctl is not None:
        prctl(ctypes.c_ulong(_PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1), 0, 0, 0)


def supervise(argv: list[str], kind: str) -> int:
    """Run ``argv`` as a child under this subreaper; kill what it left; return its status."""
    import signal

    become_subreaper()
    child = os.fork()
    if child == 0:
        _filter(kind)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)

    def stop(signum: int, frame: FrameType | None) -> None:
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass  # gone already

    signal.signal(signal.SIGTERM, stop)  # the host's timeout: the command and the rest die
    status = 0
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            break
    kill_the_rest()
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main(args: list[str]) -> None:
    """Parse ``LIMITS FILTER SUPERVISE -- argv...`` and run."""
    limits, kind, supervised, _, *argv = args
    set_limits(limits)
    if supervised == "1":
        sys.exit(supervise(argv, kind))
    _filter(kind)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
