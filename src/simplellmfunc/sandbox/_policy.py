"""``SandboxPolicy``: what sandboxed code may reach and use (frozen, serialisable)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import ConfigError

__all__ = ["LIMIT_NAMES", "SandboxPolicy", "as_policy"]

#: The limits a policy sets, as ``ResourceLimitExceeded.limit`` names them.
LIMIT_NAMES = ("memory", "cpu_time", "wall_time", "processes", "open_files", "file_size")


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
        memory_mb: Address-space limit per process (``RLIMIT_AS``), in MiB.
        cpu_seconds: CPU-time limit per process (``RLIMIT_CPU``).
        max_processes: How many processes and threads the sandbox may add (``RLIMIT_NPROC``).
        max_open_files: Open file descriptors per process (``RLIMIT_NOFILE``).
        max_file_size_mb: Largest file a process may write (``RLIMIT_FSIZE``), in MiB.
        timeout_seconds: Wall-clock limit of one sandboxed tool call or command (PyRepl cells
            keep their own ``execution_timeout_seconds``).
        env: Host environment variables passed in, on top of the base allowlist (``PATH``,
            locale...); secrets never pass unless named here.
        require_isolation: Refuse to run (:class:`~simplellmfunc.SandboxViolation`) where
            bubblewrap cannot, instead of falling back to limits and a clean environment.
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
    require_isolation: bool = False

    def __post_init__(self) -> None:
        for name in ("read_only", "writable", "env"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"SandboxPolicy.{name} must be a list of strings")
            object.__setattr__(self, name, tuple(value))
        for name in ("memory_mb", "cpu_seconds", "max_processes", "max_open_files"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"SandboxPolicy.{name} must be a positive integer or None")
        if self.max_file_size_mb is not None and self.max_file_size_mb < 0:
            raise ConfigError("SandboxPolicy.max_file_size_mb must be >= 0 or None")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ConfigError("SandboxPolicy.timeout_seconds must be positive or None")

    @classmethod
    def strict(cls) -> SandboxPolicy:
        """Small and short: 256 MiB, 10 s of CPU, 16 processes, 64 files, 16 MiB files, 30 s."""
        return cls(
            memory_mb=256,
            cpu_seconds=10,
            max_processes=16,
            max_open_files=64,
            max_file_size_mb=16,
            timeout_seconds=30.0,
        )

    @classmethod
    def default(cls) -> SandboxPolicy:
        """The defaults: no network, workspace only, 2 GiB, 256 processes, 60 s per call."""
        return cls()

    @classmethod
    def permissive(cls) -> SandboxPolicy:
        """Network on, 8 GiB, 1024 processes, 300 s per call (still no host secrets or files)."""
        return cls(network=True, memory_mb=8192, max_processes=1024, timeout_seconds=300.0)

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

    def rlimits(self, *, tasks_now: int = 0) -> dict[str, int]:
        """The ``resource`` limits to set in the sandbox, by ``RLIMIT_*`` suffix.

        Args:
            tasks_now: Tasks the user already runs (``RLIMIT_NPROC`` counts them all).
        """
        mib = 1024 * 1024
        limits = {
            "AS": None if self.memory_mb is None else self.memory_mb * mib,
            "CPU": self.cpu_seconds,
            "NPROC": None if self.max_processes is None else self.max_processes + tasks_now,
            "NOFILE": self.max_open_files,
            "FSIZE": None if self.max_file_size_mb is None else self.max_file_size_mb * mib,
        }
        return {name: value for name, value in limits.items() if value is not None}


def as_policy(sandbox: SandboxPolicy | bool | None) -> SandboxPolicy | None:
    """``True``: the default policy; ``False`` / None: no sandbox; a policy: itself."""
    if isinstance(sandbox, SandboxPolicy):
        return sandbox
    return SandboxPolicy() if sandbox else None
