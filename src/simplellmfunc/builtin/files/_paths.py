"""Workspace path resolution and symlink-safe opening for :class:`FileToolset`.

Containment works in two steps. :func:`resolve_path` resolves a model-given path with
``os.path.realpath`` and compares the result to the resolved workspace root by path components
(``Path.is_relative_to``), so ``..`` chains, sibling directories sharing a prefix and symlinks
pointing out are all refused. The resolved components contain no symlink at that moment; every
later open walks them again from the root with ``O_NOFOLLOW`` on each step (openat style), so a
symlink swapped in after the check makes the operation fail instead of escaping.

POSIX only: ``dir_fd`` operations and ``O_NOFOLLOW`` are required.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from ...exceptions import ArgumentValueError, WorkspaceError

__all__ = [
    "SECRET_PATTERNS",
    "WorkspacePath",
    "is_protected",
    "open_dir",
    "open_regular",
    "read_fd",
    "refuse_os_errors",
    "resolve_path",
    "resolve_root",
]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not hang the worker thread; it changes nothing for files.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_PROC_FD = Path("/proc/self/fd")

#: Names (matched case-insensitively against every path component) that the file tools refuse
#: by default: files and directories that usually hold credentials. ``FileToolset(protected=...)``
#: replaces the list; ``protected=()`` turns the check off.
SECRET_PATTERNS: tuple[str, ...] = (
    ".env",
    ".env.*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".ssh",
    ".gnupg",
    ".aws",
)
_P = ParamSpec("_P")
_T = TypeVar("_T")


def refuse_os_errors(func: Callable[_P, _T]) -> Callable[_P, _T]:
    """Turn an ``OSError`` of a file operation into a ``WorkspaceError`` the model can read."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return func(*args, **kwargs)
        except OSError as exc:
            name = exc.filename if isinstance(exc.filename, str) else ""
            # Names here are relative to a directory fd; an absolute one would reveal host layout.
            where = f" ({name})" if name and not os.path.isabs(name) else ""
            raise WorkspaceError(f"file operation failed: {exc.strerror or exc}{where}") from exc

    return wrapper


@dataclass(frozen=True, slots=True)
class WorkspacePath:
    """A path inside the workspace, as components below the resolved root (no ``..``)."""

    root: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        """The absolute path."""
        return self.root.joinpath(*self.parts)

    @property
    def shown(self) -> str:
        """The path as the model should name it: relative to the workspace, ``/``-separated."""
        return "/".join(self.parts) or "."

    @property
    def key(self) -> str:
        """A canonical key for per-file state (hash baselines, locks)."""
        return str(self.path)


def resolve_root(workspace: str | os.PathLike[str]) -> Path:
    """Resolve the workspace directory.

    Raises:
        ArgumentValueError: If it does not exist or is not a directory (a ``UserError`` and a
            ``ValueError``, as SimpleLLMFunc raises).
    """
    root = Path(os.path.realpath(Path(workspace).expanduser()))
    if not root.is_dir():
        raise ArgumentValueError(f"workspace is not an existing directory: {workspace}")
    return root


def is_protected(name: str, protected: tuple[str, ...]) -> bool:
    """Whether one path component matches a protected pattern (case-insensitive)."""
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, pattern) for pattern in protected)


def resolve_path(root: Path, user_path: str, protected: tuple[str, ...] = ()) -> WorkspacePath:
    """Resolve ``user_path`` (relative to ``root``, or absolute inside it).

    Raises:
        WorkspaceError: For an empty path, a NUL byte, a path that resolves outside ``root``,
            or one with a component matching ``protected`` (checked after symlinks resolve).
    """
    if not user_path or not user_path.strip():
        raise WorkspaceError("empty path: give a file path relative to the workspace root")
    if "\x00" in user_path:
        raise WorkspaceError("invalid path: it contains a NUL byte")
    candidate = Path(user_path)
    if not candidate.is_absolute():
        candidate = root / candidate
    try:
        real = Path(os.path.realpath(candidate))
    except (OSError, ValueError) as exc:
        raise WorkspaceError(f"invalid path {user_path!r}: {exc}") from None
    if not real.is_relative_to(root):
        raise WorkspaceError(
            f"path {user_path!r} resolves outside the workspace (through '..', an absolute "
            "path or a symlink) and was refused; use a path inside the workspace, relative "
            "to its root"
        )
    wp = WorkspacePath(root, real.relative_to(root).parts)
    for name in wp.parts:
        if is_protected(name, protected):
            raise WorkspaceError(
                f"{wp.shown!r} is protected: {name!r} usually holds credentials, so the file "
                "tools do not open it (the application sets this with FileToolset(protected=...))"
            )
    return wp


def _changed(shown: str) -> WorkspaceError:
    return WorkspaceError(
        f"{shown!r}: a component of the path is a symlink, a symlink loop or not a directory "
        "(it may have changed during the operation); the operation was refused"
    )


def _step(fd: int, name: str, create: bool, shown: str) -> int:
    """Open directory ``name`` below ``fd`` without following a symlink (create it if asked)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        if not create:
            raise WorkspaceError(f"{shown!r}: directory {name!r} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _changed(shown) from None
        raise
    try:
        os.mkdir(name, 0o777, dir_fd=fd)
    except FileExistsError:
        pass  # created concurrently; the open below checks what it is
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ENOTDIR, errno.ELOOP):
            raise _changed(shown) from None
        raise


def _check_inside(fd: int, root: Path, shown: str) -> None:
    """Verify where ``fd`` really is: catches a directory moved out of the workspace mid-walk."""
    link = _PROC_FD / str(fd)
    try:
        real = Path(os.readlink(link))
    except OSError:
        return  # no /proc: the O_NOFOLLOW walk is the protection
    if not real.is_relative_to(root):
        raise WorkspaceError(f"{shown!r}: the directory moved outside the workspace; refused")


@contextmanager
def open_dir(wp: WorkspacePath, *, create: bool = False) -> Iterator[int]:
    """Open the parent directory of ``wp`` by walking from the root with ``O_NOFOLLOW``.

    Yields a directory fd, closed on exit; with ``create``, missing directories are made.

    Raises:
        WorkspaceError: If a component is a symlink or not a directory, or is missing without
            ``create``.
    """
    fd = os.open(wp.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in wp.parts[:-1]:
            nxt = _step(fd, name, create, wp.shown)
            os.close(fd)
            fd = nxt
        _check_inside(fd, wp.root, wp.shown)
        yield fd
    finally:
        os.close(fd)


def open_regular(dir_fd: int, wp: WorkspacePath) -> tuple[int, os.stat_result] | None:
    """Open the last component of ``wp`` read-only without following a symlink.

    Returns:
        The fd and its stat, or ``None`` if the file does not exist.

    Raises:
        WorkspaceError: If it is a symlink, a directory or not a regular file.
    """
    if not wp.parts:
        raise WorkspaceError("'.' is the workspace directory, not a file; give a file path")
    try:
        fd = os.open(wp.parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise WorkspaceError(f"{wp.shown!r} is a directory, not a file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _changed(wp.shown) from None
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise WorkspaceError(f"{wp.shown!r} is {kind}; only regular files can be used")
    return fd, st


def read_fd(fd: int, size_hint: int) -> bytes:
    """Read ``fd`` to the end (files may grow between ``fstat`` and the read)."""
    chunks: list[bytes] = []
    want = max(size_hint, 0) + 1
    while True:
        chunk = os.read(fd, max(want, 1 << 16))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        want = 1 << 20
