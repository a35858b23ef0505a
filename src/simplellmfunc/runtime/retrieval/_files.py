"""What ingestion reads: the files under a folder, their kind, and their text.

Every file is treated as hostile:

* **No symlink is followed**, to a file or to a folder, inside the root or out of it (what a
  link inside the root points at is ingested where it really is; what it points at outside is
  never read): a ``notes -> ~/.ssh/id_rsa`` link is skipped, not indexed.
* **Only regular files are read**: each is opened one folder at a time from the root (each step
  ``O_NOFOLLOW``: a folder swapped for a link after the walk cannot lead out of the root), the
  file itself with ``O_NOFOLLOW | O_NONBLOCK``, checked with
  ``fstat`` after the open (a FIFO, a device, a socket is skipped without blocking, and a file
  swapped for something else after the walk saw it is skipped), and read with a bound: at most
  ``MAX_FILE_BYTES`` + 1 bytes, whatever its size said (``/dev/zero`` reports size 0).
* **Every skipped candidate is reported** with its reason (:class:`Skipped`): links, special
  files, files over the size limit, files that are not text (a NUL byte, or not UTF-8), PDFs
  that cannot be read. Candidates are the files whose suffix a reader knows; hidden entries
  (``.git``, ``.venv``), build folders (``__pycache__``, ``node_modules``) and unknown suffixes
  are not candidates.
* **PDFs are read with bounds** (``pypdf``, the ``[rag]`` extra, one section per page): each
  stream decompresses to at most ``MAX_PDF_STREAM_BYTES`` (a "PDF bomb" fails as a damaged file)
  and the text kept stops at ``MAX_PDF_TEXT_CHARS``.

So an ingest holds at most about ``MAX_FILE_BYTES`` of one file's data (and its chunks) at a time
while it reads, whatever the folder holds. Without ``pypdf`` PDFs are skipped.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ._chunk import Chunk, DocKind, chunk_text

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PDF_STREAM_BYTES",
    "MAX_PDF_TEXT_CHARS",
    "FileEntry",
    "Skipped",
    "kind_of",
    "read_bytes",
    "read_chunks",
    "root_label",
    "walk",
]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES: Final = 5_000_000
MAX_PDF_STREAM_BYTES: Final = 2 * MAX_FILE_BYTES
MAX_PDF_TEXT_CHARS: Final = MAX_FILE_BYTES
_SKIP_DIRS: Final = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
_KINDS: Final[dict[str, DocKind | Literal["pdf"]]] = {
    **dict.fromkeys((".md", ".markdown", ".mdx"), "markdown"),
    ".py": "python",
    ".pyi": "python",
    **dict.fromkeys(
        (".js", ".ts", ".tsx", ".jsx", ".go", ".rs", ".java", ".c", ".h", ".cc", ".cpp", ".hpp"),
        "code",
    ),
    **dict.fromkeys((".rb", ".sh", ".sql", ".toml", ".yaml", ".yml", ".cfg", ".ini"), "code"),
    **dict.fromkeys((".txt", ".rst", ".text", ""), "text"),
    ".pdf": "pdf",  # read by pages
}
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0)
_TOO_LARGE: Final = f"larger than {MAX_FILE_BYTES:,} bytes"


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file found by :func:`walk`.

    Attributes:
        path: Absolute path, no symlink in it (the key of the file in a knowledge base).
        source: What citations show: the root's label and the path under it.
        root: The folder it was found under (its own path for a single file).
        size: Bytes.
        mtime_ns: Last modification.
        inode: ``(st_dev, st_ino)`` when the walk saw it (the file read must be that one).
    """

    path: str
    source: str
    root: str
    size: int
    mtime_ns: int
    inode: tuple[int, int] = (0, 0)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A candidate file that was not ingested, and why.

    Attributes:
        source: The file as it would have been cited.
        reason: Why (``"symlink"``, ``"not a regular file (fifo)"``, ``"larger than ..."``).
    """

    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


def kind_of(path: str) -> DocKind | Literal["pdf"] | None:
    """The document kind of ``path``; ``None`` when no reader knows it."""
    return _KINDS.get(os.path.splitext(path)[1].lower())


def root_label(root: Path, taken: set[str]) -> str:
    """What citations call the files of ``root``: its name, or as many of its parent folders
    as make it differ from every label in ``taken`` (two folders named ``docs`` are cited as
    ``docs/...`` and ``other/docs/...``)."""
    parts = root.parts
    for depth in range(1, len(parts) + 1):
        label = "/".join(p for p in parts[-depth:] if p != os.sep)
        if label and label not in taken:
            return label
    return root.as_posix()


def _special(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISDIR, "folder"),
    ):
        if test(mode):
            return f"not a regular file ({name})"
    return "not a regular file"


def _entry(path: Path, root: Path, source: str) -> FileEntry | Skipped:
    try:
        info = path.lstat()
    except OSError as exc:
        return Skipped(source, f"cannot be read: {exc.strerror or exc}")
    if stat.S_ISLNK(info.st_mode):
        return Skipped(source, "symlink (not followed)")
    if not stat.S_ISREG(info.st_mode):
        return Skipped(source, _special(info.st_mode))
    if info.st_size > MAX_FILE_BYTES:
        return Skipped(source, _TOO_LARGE)
    inode = (info.st_dev, info.st_ino)
    return FileEntry(str(path), source, str(root), info.st_size, info.st_mtime_ns, inode)


def walk(target: str | os.PathLike[str], label: str | None = None) -> Iterator[FileEntry | Skipped]:
    """The candidate files of a file or folder, in a stable order: each a :class:`FileEntry`
    to read or a :class:`Skipped` with its reason. No symlink under ``target`` is followed.

    Args:
        target: A file or folder (a symlink given here is resolved: the caller named it).
        label: What citations call ``target`` (default: its name).

    Raises:
        FileNotFoundError: If ``target`` does not exist.
    """
    root = Path(target).expanduser().resolve(strict=True)
    name = label or root.name
    if not root.is_dir():
        if kind_of(root.name) is not None:
            yield _entry(root, root, name)
        return
    for folder, dirs, files in os.walk(root):
        where = Path(folder)
        prefix = "/".join([name, *where.relative_to(root).parts])
        for d in sorted(dirs):
            if (where / d).is_symlink() and not d.startswith("."):
                yield Skipped(f"{prefix}/{d}", "symlinked folder (not followed)")
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _SKIP_DIRS and not (where / d).is_symlink()
        )
        for file in sorted(files):
            if not file.startswith(".") and kind_of(file) is not None:
                yield _entry(where / file, root, f"{prefix}/{file}")


def _open_beneath(root: str, path: str) -> int:
    """``path`` opened one folder at a time from ``root``, each step with ``O_NOFOLLOW``: a
    folder swapped for a symlink after the walk saw it cannot lead the read out of the root."""
    parts = Path(path).relative_to(root).parts if path != root else ()
    if not parts:
        return os.open(path, _OPEN_FLAGS)
    folder = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], _OPEN_FLAGS, dir_fd=folder)
    finally:
        os.close(folder)


def read_bytes(entry: FileEntry) -> bytes:
    """The file's content, read as a hostile file (see the module docstring).

    Raises:
        OSError: If it cannot be opened or read.
        ValueError: If it is not the regular file the walk saw, or is too large now.
    """
    try:
        fd = _open_beneath(entry.root, entry.path)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ValueError("symlink (not followed)") from None
        raise
    with os.fdopen(fd, "rb", buffering=0) as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(_special(info.st_mode))
        if entry.inode != (0, 0) and (info.st_dev, info.st_ino) != entry.inode:
            raise ValueError("replaced while it was being ingested")
        if info.st_size > MAX_FILE_BYTES:
            raise ValueError(_TOO_LARGE)
        chunks: list[bytes] = []
        left = MAX_FILE_BYTES + 1
        while left > 0 and (piece := file.read(min(left, 1 << 20))):
            chunks.append(piece)
            left -= len(piece)
    if left <= 0:
        raise ValueError(_TOO_LARGE)
    return b"".join(chunks)


def _pdf_chunks(data: bytes, source: str, max_chars: int) -> list[Chunk] | None:
    """The chunks of a PDF, page by page; ``None`` without ``pypdf`` (the file is skipped, so
    that it is read once ``pypdf`` is installed)."""
    try:
        from pypdf import PdfReader, apply_configuration
    except ImportError:
        return None
    limits: dict[str, Any] = {
        f"{name}_maximum_output_length": MAX_PDF_STREAM_BYTES
        for name in ("zlib", "lzw", "run_length", "jbig2", "brotli")
    }
    chunks: list[Chunk] = []
    kept = 0
    with apply_configuration(
        None,
        maximum_declared_stream_length=MAX_PDF_STREAM_BYTES,
        array_based_stream_maximum_output_length=MAX_PDF_STREAM_BYTES,
        image_maximum_buffer_size=MAX_PDF_STREAM_BYTES,
        stream_decoding_work_maximum_length=4 * MAX_PDF_STREAM_BYTES,
        **limits,
    ):
        for number, page in enumerate(PdfReader(io.BytesIO(data)).pages, start=1):
            text = (page.extract_text() or "")[: MAX_PDF_TEXT_CHARS - kept]
            kept += len(text)
            heading = f"page {number}"
            chunks += chunk_text(text, source, "text", max_chars=max_chars, heading=heading)
            if kept >= MAX_PDF_TEXT_CHARS:
                logger.warning("%s: text cut at %d characters", source, MAX_PDF_TEXT_CHARS)
                break
    return chunks


def read_chunks(entry: FileEntry, max_chars: int) -> tuple[str, list[Chunk]] | Skipped:
    """The file's content hash and chunks, or why it is skipped.

    Raises:
        OSError: If the file cannot be read.
    """
    try:
        data = read_bytes(entry)
    except ValueError as exc:
        return Skipped(entry.source, str(exc))
    digest = hashlib.sha256(data).hexdigest()
    kind = kind_of(entry.path)
    if kind == "pdf":
        try:
            pages = _pdf_chunks(data, entry.source, max_chars)
        except Exception as exc:  # boundary: pypdf raises many kinds for a damaged file
            logger.warning("%s: skipped, the PDF cannot be read: %s", entry.source, exc)
            return Skipped(entry.source, f"the PDF cannot be read: {type(exc).__name__}")
        if pages is None:
            return Skipped(entry.source, "a PDF, and pypdf is not installed")
        return digest, pages
    if kind is None:
        return Skipped(entry.source, "no reader for this kind of file")
    if b"\x00" in data:
        return Skipped(entry.source, "not text (a NUL byte)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return Skipped(entry.source, "not text (not UTF-8)")
    return digest, chunk_text(text, entry.source, kind, max_chars=max_chars)
