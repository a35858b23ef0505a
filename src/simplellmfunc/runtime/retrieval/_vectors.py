"""Dense vectors in the knowledge base's file, with ``sqlite-vec``.

``sqlite-vec`` is a SQLite extension (the ``[rag]`` extra). Loading it needs a SQLite that
allows extensions: the standard :mod:`sqlite3` when Python was built with it, else the
``pysqlite3`` drop-in (also in the extra, on Linux). :func:`vec_driver` picks one.

The table is ``vec0(embedding float[D] distance_metric=cosine)`` keyed by the chunk's rowid,
created with the first vector, its size ``D`` kept in ``meta``.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from typing import Any

from ...exceptions import ConfigError

__all__ = [
    "add_vectors",
    "delete_vectors",
    "has_vectors",
    "load_vec",
    "missing_vectors",
    "nearest",
    "vec_driver",
]

_INSTALL = "pip install 'simplellmfunc[rag]'"


def vec_driver() -> Any:
    """The DB-API module to open a knowledge base with, so that ``sqlite-vec`` can load:
    ``None`` for :mod:`sqlite3`, else ``pysqlite3``.

    Raises:
        ConfigError: When ``sqlite-vec`` is not installed, or no SQLite here loads extensions.
    """
    try:
        import sqlite_vec  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        raise ConfigError(f"dense search needs sqlite-vec: {_INSTALL}") from None
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return None
    try:
        import pysqlite3.dbapi2 as driver  # type: ignore[import-untyped]
    except ImportError:
        raise ConfigError(
            "this Python's sqlite3 cannot load extensions (sqlite-vec); install the pysqlite3 "
            f"drop-in: {_INSTALL} (or pip install pysqlite3-binary)"
        ) from None
    return driver


def load_vec(conn: sqlite3.Connection) -> None:
    """Load ``sqlite-vec`` into ``conn`` (opened with :func:`vec_driver`'s module).

    Raises:
        ConfigError: When the connection cannot load extensions (a shared database opened
            with a ``sqlite3`` that does not allow them).
    """
    import sqlite_vec

    if not hasattr(conn, "enable_load_extension"):
        raise ConfigError(
            "this SQLite connection cannot load extensions (sqlite-vec): give KnowledgeBase "
            "the file's path instead, so that it opens the file with a driver that can"
        )
    conn.enable_load_extension(True)
    try:
        sqlite_vec.load(conn)
    finally:
        conn.enable_load_extension(False)


def _blob(vector: Sequence[float]) -> bytes:
    return struct.pack(f"{len(vector)}f", *vector)


def add_vectors(
    conn: sqlite3.Connection, rowids: Sequence[int], vectors: Sequence[Sequence[float]]
) -> None:
    """Store the vectors of chunks (the table is made with the first; all have its size).

    Raises:
        ConfigError: When a vector's size differs from the table's.
    """
    if not vectors:
        return
    size = len(vectors[0])
    row = conn.execute("SELECT value FROM meta WHERE key = 'embedding_dimensions'").fetchone()
    if row is None:
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING "
            f"vec0(embedding float[{size}] distance_metric=cosine)"
        )
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedding_dimensions', ?)", (size,))
    elif int(row[0]) != size or any(len(v) != size for v in vectors):
        raise ConfigError(
            f"the knowledge base holds {row[0]}-dimensional vectors; the embedder gave "
            f"{size}: use the same embedding model (or a new knowledge base)"
        )
    conn.executemany(
        "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)",
        [(r, _blob(v)) for r, v in zip(rowids, vectors, strict=True)],
    )


def delete_vectors(conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
    """Forget the vectors of removed chunks (nothing when there is no vector table)."""
    if rowids and has_vectors(conn):
        conn.executemany("DELETE FROM chunks_vec WHERE rowid = ?", [(r,) for r in rowids])


def has_vectors(conn: sqlite3.Connection) -> bool:
    """Whether the knowledge base has a vector table."""
    row = conn.execute("SELECT 1 FROM meta WHERE key = 'embedding_dimensions'").fetchone()
    return row is not None


def missing_vectors(conn: sqlite3.Connection) -> list[tuple[int, str, str]]:
    """The chunks without a vector (ingested before an embedder was used): rowid, heading,
    text."""
    total = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    have: set[int] = set()
    if has_vectors(conn):
        if conn.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == total:
            return []
        have = {row[0] for row in conn.execute("SELECT rowid FROM chunks_vec")}
    rows = conn.execute("SELECT rowid, heading, text FROM chunks ORDER BY rowid")
    return [row for row in rows if row[0] not in have]


_NEAREST = (
    "SELECT c.id, c.source, c.heading, c.start_line, c.end_line, c.text, v.distance "
    "FROM (SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?) AS v "
    "JOIN chunks AS c ON c.rowid = v.rowid ORDER BY v.distance"
)


def nearest(
    conn: sqlite3.Connection, vector: Sequence[float], k: int
) -> list[tuple[str, str, str, int, int, str, float]]:
    """The ``k`` chunks nearest to ``vector`` (score: cosine similarity); a chunk at a right
    angle or more (cosine ≤ 0: nothing in common) is no match."""
    if not has_vectors(conn):
        return []
    rows = conn.execute(_NEAREST, (_blob(vector), k))
    return [(*row[:6], 1.0 - row[6]) for row in rows if row[6] < 1.0 - 1e-9]
