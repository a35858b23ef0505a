"""Atomic file replacement relative to a directory fd.

The new content goes to a temporary file in the same directory, is flushed to disk and then
renamed over the target. The rename replaces whatever directory entry has the target's name (a
symlink swapped in included) instead of writing through it, readers never see a half-written
file, and the file keeps its permission bits.
"""

from __future__ import annotations

import os
import secrets
import stat

__all__ = ["atomic_write"]

_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def atomic_write(dir_fd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """Replace ``name`` in directory ``dir_fd`` with ``data``, atomically.

    Args:
        dir_fd: An open directory fd.
        name: The file name inside that directory (a single component).
        data: The complete new content.
        mode: Permission bits to give the file (the old file's, to keep them); ``None`` for a
            new file, which gets ``0o666`` minus the process umask.

    Raises:
        OSError: If the temporary file cannot be written or renamed; it is removed first.
    """
    tmp = f".{secrets.token_hex(8)}.slf-tmp"
    # A new file gets 0o666 filtered by the umask from the kernel, with no racy os.umask() call;
    # an existing file's mode is applied with fchmod before the rename makes it visible.
    fd = os.open(tmp, _TMP_FLAGS, 0o600 if mode is not None else 0o666, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass  # already renamed or never created; the original error matters
        raise
    # Make the rename itself durable.
    os.fsync(dir_fd)
