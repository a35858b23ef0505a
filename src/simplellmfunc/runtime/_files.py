"""Files the runtime opens by path: their folders are made on first use.

A config that says ``memory.path: .simplellmfunc/memory.db`` (or a trace file, or a checkpoint
folder) should work on a fresh checkout, so every file the runtime opens by path gets its
parent folders created first. Shared by the stores and the trace sinks.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._persist import DatabaseLike, SQLiteDatabase, open_database
from ..exceptions import ConfigError

__all__ = ["ensure_parent", "open_sqlite"]

_NOT_FILES = ("", ":memory:")  # SQLite's private temporary and in-memory databases


def ensure_parent(path: str | Path) -> None:
    """Create the folders ``path`` will live in (nothing if they exist).

    Raises:
        ConfigError: If a folder cannot be created (a file in the way, no permission).
    """
    parent = Path(path).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the folder {str(parent)!r}: {exc.strerror}") from exc


def open_sqlite(
    target: DatabaseLike, schema: Sequence[str], *, durable: bool
) -> tuple[SQLiteDatabase, bool]:
    """:func:`~simplellmfunc._persist.open_database`, creating a file path's folders first.

    Raises:
        ConfigError: If the folder cannot be created or the database cannot be opened.
    """
    if not isinstance(target, SQLiteDatabase) and str(target) not in _NOT_FILES:
        ensure_parent(target)
    return open_database(target, schema, durable=durable)
