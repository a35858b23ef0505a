"""What ingestion reads: the files under a folder, their kind, and their text.

Hidden entries (``.git``, ``.venv``) and build folders (``__pycache__``, ``node_modules``) are
skipped, and so are files larger than ``MAX_FILE_BYTES``, files that are not text (a NUL byte, or
not UTF-8) and suffixes no reader knows. PDF files are read with ``pypdf`` when it is installed
(the ``[rag]`` extra), one section per page; otherwise they are skipped.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from ._chunk import Chunk, DocKind, chunk_text

__all__ = ["MAX_FILE_BYTES", "FileEntry", "kind_of", "read_chunks", "walk"]

logger = logging.getLogger(__name__)

MAX_FILE_BYTES: Final = 5_000_000
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


@dataclass(frozen=True, slots=True)
class FileEntry:
    """A file found by :func:`walk`.

    Attributes:
        path: Absolute, resolved path (the key of the file in a knowledge base).
        source: What citations show: the path relative to the ingested folder's parent.
        root: The folder it was found under (its own path for a single file).
        size: Bytes.
        mtime_ns: Last modification.
    """

    path: str
    source: str
    root: str
    size: int
    mtime_ns: int


def kind_of(path: str) -> DocKind | Literal["pdf"] | None:
    """The document kind of ``path``; ``None`` when no reader knows it."""
    return _KINDS.get(os.path.splitext(path)[1].lower())


def _entry(path: Path, root: Path, base: Path) -> FileEntry | None:
    try:
        info = path.stat()
    except OSError:
        return None
    if info.st_size > MAX_FILE_BYTES or kind_of(path.name) is None:
        return None
    return FileEntry(
        str(path), path.relative_to(base).as_posix(), str(root), info.st_size, info.st_mtime_ns
    )


def walk(target: str | os.PathLike[str]) -> Iterator[FileEntry]:
    """The readable files of a file or folder, in a stable order.

    Raises:
        FileNotFoundError: If ``target`` does not exist.
    """
    root = Path(target).expanduser().resolve(strict=True)
    if root.is_file():
        entry = _entry(root, root, root.parent)
        if entry is not None:
            yield entry
        return
    base = root.parent
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            if not name.startswith("."):
                entry = _entry(Path(folder) / name, root, base)
                if entry is not None:
                    yield entry


def _pdf_chunks(data: bytes, source: str, max_chars: int) -> list[Chunk] | None:
    """The chunks of a PDF, page by page; ``None`` without ``pypdf`` (the file is skipped, so
    that it is read once ``pypdf`` is installed)."""
    try:
        from pypdf import PdfReader
    except ImportError:
        return None
    chunks: list[Chunk] = []
    for number, page in enumerate(PdfReader(io.BytesIO(data)).pages, start=1):
        text = page.extract_text() or ""
        chunks += chunk_text(text, source, "text", max_chars=max_chars, heading=f"page {number}")
    return chunks


def read_chunks(entry: FileEntry, max_chars: int) -> tuple[str, list[Chunk]] | None:
    """The file's content hash and chunks; ``None`` when it is not readable text.

    Raises:
        OSError: If the file cannot be read.
    """
    data = Path(entry.path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    kind = kind_of(entry.path)
    if kind == "pdf":
        try:
            pages = _pdf_chunks(data, entry.source, max_chars)
        except Exception as exc:  # boundary: pypdf raises many kinds for a damaged file
            logger.warning("%s: skipped, the PDF cannot be read: %s", entry.source, exc)
            return None
        return None if pages is None else (digest, pages)
    if kind is None or b"\x00" in data:
        return None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return digest, chunk_text(text, entry.source, kind, max_chars=max_chars)
