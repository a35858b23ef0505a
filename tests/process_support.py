"""Finding, on the host, a process that a (possibly sandboxed) PyRepl kernel names by its pid.

A sandboxed kernel runs in a PID namespace of its own: the pids it sees (``os.getpid()``,
``Popen(...).pid``) are not the host's. The host sees every process of the namespace, though:
``/proc/<pid>/status`` lists a process's pid in each namespace it belongs to (``NSpid``, the
host's first, the innermost last), so a kernel-side pid maps back to a host process.
"""

from __future__ import annotations

import psutil

__all__ = ["host_process", "ns_pids"]


def ns_pids(pid: int) -> list[int]:
    """``pid``'s pids from the host's namespace to its innermost one (``[]`` if gone)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("NSpid:"):
                    return [int(n) for n in line.split()[1:]]
    except OSError:
        pass
    return []


def host_process(inner_pid: int, root: psutil.Process | None = None) -> psutil.Process:
    """The descendant of ``root`` (default: this process) a kernel calls ``inner_pid``.

    A process in a nested PID namespace wins over a host process that has that pid itself
    (the unsandboxed case: the kernel's pids are the host's).
    """
    found = {}
    for process in (root or psutil.Process()).children(recursive=True):
        pids = ns_pids(process.pid)
        if pids and pids[-1] == inner_pid:
            found[len(pids) > 1] = process
    for nested in (True, False):
        if nested in found:
            return found[nested]
    raise LookupError(f"no descendant process is pid {inner_pid} in its namespace")
