"""The knowledge base's SQLite tables and the statements on them (synchronous, one connection).

* ``files``: one row per ingested file (path, source, root, size, mtime, content hash).
* ``chunks``: the passages; ``chunks_fts`` an FTS5 index over their heading and text (external
  content; ``porter`` stemming; BM25 with the heading weighted 2×). The index is kept in step
  by :func:`insert_chunks` and :func:`delete_chunks`, one statement for many rows, not by
  triggers: FTS5 flushes its pending terms at every statement savepoint, and a trigger opens
  one per row (files made with the triggers lose them when opened).
* ``meta``: key/value (the embedding model and its dimensions).
* ``chunks_vec``: a ``sqlite-vec`` table of the chunks' vectors (see :mod:`._vectors`), created
  with the first vector.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Final

from ._chunk import Chunk
from ._files import FileEntry

__all__ = [
    "SCHEMA",
    "chunk_rowids",
    "delete_chunks",
    "delete_files",
    "fts_query",
    "get_meta",
    "insert_chunks",
    "keyword_search",
    "known_files",
    "move_chunks",
    "set_meta",
    "upsert_file",
]

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS files (
        path TEXT PRIMARY KEY, source TEXT NOT NULL, root TEXT NOT NULL, size INTEGER NOT NULL,
        mtime_ns INTEGER NOT NULL, sha256 TEXT NOT NULL, chunks INTEGER NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS chunks (
        rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, path TEXT NOT NULL,
        source TEXT NOT NULL, heading TEXT NOT NULL, start_line INTEGER NOT NULL,
        end_line INTEGER NOT NULL, text TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS chunks_path ON chunks (path)",
    """CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5 (
        heading, text, content='chunks', content_rowid='rowid', tokenize='porter unicode61')""",
    "DROP TRIGGER IF EXISTS chunks_ai",  # an index update per row: see the module docstring
    "DROP TRIGGER IF EXISTS chunks_ad",
    "INSERT OR IGNORE INTO chunks_fts (chunks_fts, rank) VALUES ('rank', 'bm25(2.0, 1.0)')",
)

_BATCH: Final = 500  # rowids per statement (old SQLite builds allow 999 parameters)
_WORD: Final = re.compile(r"\w+")
_STOP: Final = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "with",
        "you",
        "your",
    ]
)


def fts_query(text: str) -> str:
    """A free-text question as an FTS5 query: its words, quoted, joined by ``OR`` (stop words
    dropped unless nothing else is left); ``""`` when it has no word."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))
    kept = [w for w in words if w not in _STOP] or words
    return " OR ".join(f'"{w}"' for w in kept)


Row = tuple[str, str, str, int, int, str, float]  # id, source, heading, start, end, text, score

# The top k are picked inside FTS5 first (its ORDER BY rank LIMIT is optimised), then joined:
# a join around the MATCH would fetch every matching row's text before sorting.
_SELECT: Final = (
    "SELECT c.id, c.source, c.heading, c.start_line, c.end_line, c.text, m.rank "
    "FROM (SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?) "
    "AS m JOIN chunks AS c ON c.rowid = m.rowid ORDER BY m.rank"
)


def keyword_search(conn: sqlite3.Connection, query: str, k: int) -> list[Row]:
    """The ``k`` best chunks for an FTS5 ``query`` by BM25 (score: higher is better)."""
    if not query:
        return []
    return [(*row[:6], -row[6]) for row in conn.execute(_SELECT, (query, k))]


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """A ``meta`` value."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def set_meta(conn: sqlite3.Connection, key: str, value: str) -> None:
    """Set a ``meta`` value."""
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def known_files(conn: sqlite3.Connection) -> dict[str, tuple[int, int, str, str]]:
    """Every ingested file: path → (size, mtime_ns, sha256, root)."""
    rows = conn.execute("SELECT path, size, mtime_ns, sha256, root FROM files")
    return {path: (size, mtime, sha, root) for path, size, mtime, sha, root in rows}


def upsert_file(conn: sqlite3.Connection, entry: FileEntry, sha256: str, chunks: int) -> None:
    """Record ``entry`` as ingested."""
    conn.execute(
        "INSERT OR REPLACE INTO files (path, source, root, size, mtime_ns, sha256, chunks) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (entry.path, entry.source, entry.root, entry.size, entry.mtime_ns, sha256, chunks),
    )


def chunk_rowids(conn: sqlite3.Connection, path: str) -> dict[str, int]:
    """A file's chunks: id → rowid."""
    rows = conn.execute("SELECT id, rowid FROM chunks WHERE path = ?", (path,))
    return dict(rows)


def insert_chunks(conn: sqlite3.Connection, chunks: Sequence[tuple[str, Chunk]]) -> list[int]:
    """Add chunks, each with its file's path, and index them; their rowids, in order."""
    if not chunks:
        return []
    first = int(conn.execute("SELECT coalesce(max(rowid), 0) + 1 FROM chunks").fetchone()[0])
    rowids = list(range(first, first + len(chunks)))
    conn.executemany(
        "INSERT INTO chunks (rowid, id, path, source, heading, start_line, end_line, text) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (rowid, c.id, path, c.source, c.heading, c.start_line, c.end_line, c.text)
            for rowid, (path, c) in zip(rowids, chunks, strict=True)
        ],
    )
    conn.execute(
        "INSERT INTO chunks_fts (rowid, heading, text) "
        "SELECT rowid, heading, text FROM chunks WHERE rowid >= ?",
        (first,),
    )
    return rowids


def move_chunks(conn: sqlite3.Connection, chunks: Iterable[Chunk]) -> None:
    """Update the line range of chunks that are kept (same id, lines moved)."""
    conn.executemany(
        "UPDATE chunks SET start_line = ?, end_line = ? WHERE id = ?",
        [(c.start_line, c.end_line, c.id) for c in chunks],
    )


def delete_chunks(conn: sqlite3.Connection, rowids: Sequence[int]) -> None:
    """Remove chunks by rowid, from the table and the FTS index."""
    for start in range(0, len(rowids), _BATCH):
        batch = rowids[start : start + _BATCH]
        marks = ", ".join("?" * len(batch))
        conn.execute(
            "INSERT INTO chunks_fts (chunks_fts, rowid, heading, text) "
            f"SELECT 'delete', rowid, heading, text FROM chunks WHERE rowid IN ({marks})",
            batch,
        )
        conn.execute(f"DELETE FROM chunks WHERE rowid IN ({marks})", batch)


def delete_files(conn: sqlite3.Connection, paths: Iterable[str]) -> list[int]:
    """Forget files and their chunks; the rowids of the chunks removed."""
    removed: list[int] = []
    for path in paths:
        rowids = list(chunk_rowids(conn, path).values())
        delete_chunks(conn, rowids)
        conn.execute("DELETE FROM files WHERE path = ?", (path,))
        removed += rowids
    return removed
