"""``SandboxPolicy``: what sandboxed code may reach and use (frozen, serialisable)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConfigError

__all__ = ["LIMIT_NAMES", "SEED_NAMES", "SandboxPolicy", "as_policy"]

#: The limits a policy sets, as ``ResourceLimitExceeded.limit`` names them.
LIMIT_NAMES = (
    "memory", "cpu_time", "wall_time", "processes", "open_files", "file_size", "output",
)  # fmt: skip
#: Seed 001 §24's field names, accepted by :meth:`SandboxPolicy.of` and ``@sandboxed(...)``.
SEED_NAMES = {"timeout": "timeout_seconds", "max_fds": "max_open_files"}


@dataclass(frozen=True, slots=True)
class SandboxPolicy:
    """How code runs in a sandbox (bubblewrap where it works; see ``docs/sandbox.md``).

    The filesystem inside is the workspace (read-write), the ``writable`` and ``read_only``
    paths, and what the Python interpreter and the system need to run (read-only); everything
    else, the host's home, ``/proc`` of other processes and the current directory included, is
    absent.

    Attributes:
        network: Whether the sandbox shares the host's network (``False``: a network namespace
            of its own with only its own loopback).
        read_only: Extra host paths visible read-only.
        writable: Extra host paths visible read-write (besides the workspace).
        memory_mb: Address-space limit per process (``RLIMIT_AS``), in MiB; for a sandboxed
            tool, what one call may add to the worker's (its imports are not the call's).
        cpu_seconds: CPU-time limit per process (``RLIMIT_CPU``).
        max_processes: How many processes and threads the sandbox may add (``RLIMIT_NPROC``).
        max_open_files: Open file descriptors per process (``RLIMIT_NOFILE``); for a sandboxed
            tool, what one call may open besides the worker's own.
        max_file_size_mb: Largest file a process may write (``RLIMIT_FSIZE``), in MiB.
        timeout_seconds: Wall-clock limit of one sandboxed tool call or command (PyRepl cells
            keep their own ``execution_timeout_seconds``).
        env: Host environment variables passed in, on top of the base allowlist (``PATH``,
            locale...); secrets never pass unless named here.
        allow_subprocess: ``False``: the code may start no process (the seccomp filter refuses
            ``fork``, ``vfork``, ``clone`` of a process; a sandboxed tool's call also ``execve``);
            threads stay allowed.
        max_output_bytes: Largest result a sandboxed tool may return (its JSON), and the output
            a shell command keeps per stream; over it a tool call fails with
            :class:`~simplellmfunc.exceptions.OutputViolation`. ``None``: the tool's own caps.
        require_isolation: ``True``: refuse to run (:class:`~simplellmfunc.SandboxViolation`)
            where bubblewrap cannot; ``False``: accept the fallback (limits, seccomp, a clean
            environment), loudly; ``None`` (default): required when the host runs as root or
            subprocesses are forbidden (:meth:`isolation_required`).
    """

    network: bool = False
    read_only: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    memory_mb: int | None = 2048
    cpu_seconds: int | None = None
    max_processes: int | None = 256
    max_open_files: int | None = 1024
    max_file_size_mb: int | None = 1024
    timeout_seconds: float | None = 60.0
    env: tuple[str, ...] = ()
    allow_subprocess: bool = True
    max_output_bytes: int | None = None
    require_isolation: bool | None = None

    def __post_init__(self) -> None:
        for name in ("read_only", "writable", "env"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"SandboxPolicy.{name} must be a list of strings")
            object.__setattr__(self, name, tuple(value))
        for name in (
            "memory_mb", "cpu_seconds", "max_processes", "max_open_files", "max_output_bytes",
        ):  # fmt: skip
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"SandboxPolicy.{name} must be a positive integer or None")
        if self.max_file_size_mb is not None and self.max_file_size_mb < 0:
            raise ConfigError("SandboxPolicy.max_file_size_mb must be >= 0 or None")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ConfigError("SandboxPolicy.timeout_seconds must be positive or None")

    def isolation_required(self) -> bool:
        """Whether this policy refuses to run without bubblewrap.

        ``require_isolation`` when set; otherwise yes as root (the fallback would run the code
        as the host's root) and when subprocesses are forbidden (the strict preset).
        """
        if self.require_isolation is not None:
            return self.require_isolation
        return os.geteuid() == 0 or not self.allow_subprocess

    # The presets carry seed 001 §24.3's values; `SandboxPolicy()` (PyRepl's) is roomier: a
    # kernel needs about 1 GiB of address space and runs pip, shells and other processes.
    @classmethod
    def strict(cls) -> SandboxPolicy:
        """Seed §24.3 strict: 5 s, 64 MiB, no network, no subprocess, 4 KiB output, 8 files.

        Isolation is required (no fallback).
        """
        return cls(
            timeout_seconds=5.0, memory_mb=64, network=False, allow_subprocess=False,
            max_output_bytes=4096, max_open_files=8, max_processes=16, cpu_seconds=5,
            max_file_size_mb=16, require_isolation=True,
        )  # fmt: skip

    @classmethod
    def default(cls) -> SandboxPolicy:
        """Seed §24.3 default: 30 s, 256 MiB, no network, no subprocess, 64 KiB, 64 files."""
        return cls(
            timeout_seconds=30.0, memory_mb=256, network=False, allow_subprocess=False,
            max_output_bytes=65536, max_open_files=64, max_processes=64,
        )  # fmt: skip

    @classmethod
    def permissive(cls) -> SandboxPolicy:
        """Seed §24.3 permissive: 300 s, 2 GiB, network, subprocesses, 1 MiB output, 256 files.

        Still no host secrets or files.
        """
        return cls(
            timeout_seconds=300.0, memory_mb=2048, network=True, allow_subprocess=True,
            max_output_bytes=1024 * 1024, max_open_files=256, max_processes=1024,
        )  # fmt: skip

    @classmethod
    def of(cls, base: SandboxPolicy | None = None, **fields: Any) -> SandboxPolicy:
        """``base`` (default: :meth:`default`) with ``fields``, seed names accepted.

        ``SandboxPolicy.of(timeout=10, memory_mb=128)`` is seed §24.3's
        ``SandboxPolicy(timeout=10, memory_mb=128)`` (``timeout`` is ``timeout_seconds``,
        ``max_fds`` is ``max_open_files``).

        Raises:
            ConfigError: For an unknown field or an invalid value.
        """
        named = {SEED_NAMES.get(k, k): v for k, v in fields.items()}
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(named) - known)
        if unknown:
            raise ConfigError(f"unknown sandbox policy field(s): {', '.join(unknown)}")
        return dataclasses.replace(base or cls.default(), **named)

    def replace(self, **changes: Any) -> SandboxPolicy:
        """A copy with ``changes`` applied."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The policy as JSON-ready data (tuples become lists)."""
        data = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SandboxPolicy:
        """Build a policy from :meth:`to_dict` data (a config file's ``sandbox:`` section).

        Raises:
            ConfigError: For an unknown field or an invalid value.
        """
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown sandbox policy field(s): {', '.join(unknown)}")
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise ConfigError(f"invalid sandbox policy: {exc}") from None

    def rlimits(self, *, tasks_now: int = 0, per_call: bool = False) -> dict[str, int]:
        """The ``resource`` limits to set in the sandbox, by ``RLIMIT_*`` suffix.

        Args:
            tasks_now: Tasks already counted (``RLIMIT_NPROC`` counts every task of the uid;
                in a user namespace of the sandbox's own, only the sandbox's: its init, the
                launcher).
            per_call: For a sandboxed tool's worker: the memory and file limits are set per
                call instead (on top of what the worker uses), so leave them out.
        """
        mib = 1024 * 1024
        limits = {
            "AS": None if self.memory_mb is None or per_call else self.memory_mb * mib,
            "CPU": self.cpu_seconds,
            "NPROC": None if self.max_processes is None else self.max_processes + tasks_now,
            "NOFILE": None if per_call else self.max_open_files,
            "FSIZE": None if self.max_file_size_mb is None else self.max_file_size_mb * mib,
        }
        return {name: value for name, value in limits.items() if value is not None}


def as_policy(sandbox: SandboxPolicy | bool | None) -> SandboxPolicy | None:
    """``True``: the default policy; ``False`` / None: no sandbox; a policy: itself."""
    if isinstance(sandbox, SandboxPolicy):
        return sandbox
    return SandboxPolicy() if sandbox else None
