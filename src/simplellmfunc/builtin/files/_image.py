"""``read_image`` support: a symlink-safe check that a workspace file is a usable image."""

from __future__ import annotations

import os
from pathlib import Path

from ..._content import ImgPath
from ...exceptions import ContentError, WorkspaceError
from ._paths import open_dir, open_regular, refuse_os_errors, resolve_path

__all__ = ["MAX_IMAGE_BYTES", "load_image"]

MAX_IMAGE_BYTES = 20 * 1024 * 1024
_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
}


def _sniff(head: bytes) -> str | None:
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    for mime, magics in _MAGIC.items():
        if head.startswith(magics):
            return mime
    return None


@refuse_os_errors
def load_image(root: Path, path: str, protected: tuple[str, ...] = ()) -> ImgPath:
    """Return ``path`` as an :class:`ImgPath` with detail ``"high"`` (blocking).

    Providers check that the declared media type matches the bytes, so the content must be a
    PNG, JPEG, GIF or WebP image agreeing with the file extension.

    Raises:
        WorkspaceError: If the path is outside ``root``, missing, too large or not such an image.
    """
    wp = resolve_path(root, path, protected)
    with open_dir(wp) as dir_fd:
        opened = open_regular(dir_fd, wp)
        if opened is None:
            raise WorkspaceError(f"file not found: {wp.shown!r}")
        fd, st = opened
        try:
            head = os.read(fd, 16)
        finally:
            os.close(fd)
    if st.st_size > MAX_IMAGE_BYTES:
        raise WorkspaceError(f"{wp.shown!r} is over the {MAX_IMAGE_BYTES // 2**20} MB image limit")
    sniffed = _sniff(head)
    if sniffed is None:
        raise WorkspaceError(f"{wp.shown!r} is not a PNG, JPEG, GIF or WebP image")
    try:
        image = ImgPath(wp.path, detail="high")
    except ContentError as exc:
        raise WorkspaceError(f"{wp.shown!r}: {exc}") from None
    if image.mime_type != sniffed:
        raise WorkspaceError(
            f"{wp.shown!r} has the extension of {image.mime_type} but contains {sniffed}; "
            "rename it to match its content"
        )
    return image
