"""The knowledge base's SQLite tables and the statements on them (synchronous, one connection).

* ``files``: one row per ingested file (path, source, root, size, mtime, content hash).
* ``chunks``: the passages; ``chunks_fts`` an FTS5 index over their heading and text (external
  content; ``porter`` stemming; BM25 with the heading weighted 2×). The index is kept in step
  by :func:`insert_chunks` and :func:`delete_chunks`, one statement for many rows, not by
  triggers: FTS5 flushes its pending terms at every statement savepoint, and a trigger opens
  one per row (files made with the triggers lose them when opened).
* **CJK text** (Chinese, Japanese kana, Korean hangul) has no spaces between words, and FTS5's
  ``unicode61`` tokenizer keeps a run of it as one token (``演算`` would never match inside
  ``λ演算是一种形式系统``). So the index holds it character by character (:func:`fts_text`, a
  space around each CJK character, applied in SQL by the ``slf_fts_text`` function) and a
  query looks for each pair of adjacent characters as a phrase (CJK bigrams, :func:`fts_query`).
  A file indexed before this (``meta.fts_cjk`` unset) is re-indexed when opened
  (:func:`migrate`).
* ``meta``: key/value (the embedding model and its dimensions).
* ``chunks_vec``: a ``sqlite-vec`` table of the chunks' vectors (see :mod:`._vectors`), created
  with the first vector.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from pathlib import PurePath
from typing import Final

from ._chunk import Chunk
from ._files import FileEntry

__all__ = [
    "PAGE_SIZE",
    "SCHEMA",
    "Row",
    "chunk_rowids",
    "delete_chunks",
    "delete_files",
    "fts_query",
    "fts_text",
    "get_meta",
    "insert_chunks",
    "keyword_search",
    "known_files",
    "migrate",
    "move_chunks",
    "register_functions",
    "root_labels",
    "set_meta",
    "upsert_file",
    "upsert_files",
]

# A new file's pages: twice SQLite's default, for the FTS5 segments (written in large runs):
# ingestion's statements and its checkpoint are about 10 % faster (benchmarks/bench_rag.py).
PAGE_SIZE: Final = 8192

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
_CJK_CHARS: Final = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK: Final = re.compile(f"[{_CJK_CHARS}]")
_CJK_RUN: Final = re.compile(f"([{_CJK_CHARS}]+)")
_FTS_TEXT: Final = "slf_fts_text"  # the SQL name of fts_text
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


def fts_text(text: str) -> str:
    """``text`` as the index holds it: a space around each CJK character."""
    if text.isascii():  # the usual case, at C speed: nothing to space out
        return text
    return _CJK.sub(r" \g<0> ", text) if _CJK.search(text) else text


def _terms(word: str) -> list[str]:
    """The FTS5 phrases of one query word: the word, or for a CJK run each pair of adjacent
    characters (the character alone when the run has one)."""
    terms: list[str] = []
    for n, part in enumerate(_CJK_RUN.split(word)):
        if not part:
            continue
        if n % 2 == 0 or len(part) == 1:  # not CJK
            terms.append(part)
        else:
            terms += [f"{a} {b}" for a, b in itertools.pairwise(part)]
    return terms


def fts_query(text: str) -> str:
    """A free-text question as an FTS5 query: its words (CJK as character bigrams), quoted,
    joined by ``OR`` (stop words dropped unless nothing else is left); ``""`` when it has no
    word."""
    words = list(dict.fromkeys(t for w in _WORD.findall(text.lower()) for t in _terms(w)))
    kept = [w for w in words if w not in _STOP] or words
    return " OR ".join(f'"{w}"' for w in kept)


def register_functions(conn: sqlite3.Connection) -> None:
    """Make ``slf_fts_text`` callable in SQL on ``conn`` (before any statement of the knowledge
    base runs: SQLite refuses a new function while a statement is active)."""
    conn.create_function(_FTS_TEXT, 1, fts_text, deterministic=True)


def migrate(conn: sqlite3.Connection) -> None:
    """Re-index a file made before CJK text was indexed by character (see the module
    docstring); mark a new one."""
    if get_meta(conn, "fts_cjk") == "1":
        return
    if conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone() is not None:
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('delete-all')")
        conn.execute(
            f"INSERT INTO chunks_fts (rowid, heading, text) "
            f"SELECT rowid, {_FTS_TEXT}(heading), {_FTS_TEXT}(text) FROM chunks"
        )
    set_meta(conn, "fts_cjk", "1")


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


def root_labels(conn: sqlite3.Connection) -> dict[str, str]:
    """Every ingested root → its label, the start of its files' sources (one file per root
    tells it: the source is the label, then the path under the root)."""
    rows = conn.execute("SELECT root, min(path), source FROM files WHERE root != '' GROUP BY root")
    labels: dict[str, str] = {}
    for root, path, source in rows:
        depth = len(PurePath(path).relative_to(root).parts)
        labels[root] = "/".join(source.split("/")[: len(source.split("/")) - depth] or [source])
    return labels


def upsert_file(conn: sqlite3.Connection, entry: FileEntry, sha256: str, chunks: int) -> None:
    """Record ``entry`` as ingested."""
    upsert_files(conn, [(entry, sha256, chunks)])


def upsert_files(conn: sqlite3.Connection, files: Iterable[tuple[FileEntry, str, int]]) -> None:
    """Record files as ingested: each entry, its content hash and its number of chunks."""
    conn.executemany(
        "INSERT OR REPLACE INTO files (path, source, root, size, mtime_ns, sha256, chunks) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (entry.path, entry.source, entry.root, entry.size, entry.mtime_ns, sha256, chunks)
            for entry, sha256, chunks in files
        ],
    )


def chunk_rowids(conn: sqlite3.Connection, path: str) -> dict[str, int]:
    """A file's chunks: id → rowid."""
    rows = conn.execute("SELECT id, rowid FROM chunks WHERE path = ?", (path,))
    return dict(rows)


def insert_chunks(
    conn: sqlite3.Connection,
    chunks: Sequence[tuple[str, Chunk]],
    *,
    before_index: Callable[[], None] | None = None,
) -> list[int]:
    """Add chunks, each with its file's path, and index them; their rowids, in order.

    ``before_index`` is called once the rows are written, right before they are indexed: in
    the usual case (no CJK text) that is one statement that runs in SQLite alone, without the
    GIL, so a thread that waited for it can run Python meanwhile.
    """
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
    spaced = [(fts_text(c.heading), fts_text(c.text)) for _, c in chunks]
    if before_index is not None:
        before_index()
    if all(h is c.heading and t is c.text for (h, t), (_, c) in zip(spaced, chunks, strict=True)):
        # The usual case (no CJK text): one statement, the index built from the rows just
        # written, in SQLite alone.
        conn.execute(
            "INSERT INTO chunks_fts (rowid, heading, text) "
            "SELECT rowid, heading, text FROM chunks WHERE rowid BETWEEN ? AND ?",
            (first, rowids[-1]),
        )
        return rowids
    # From the values in hand (not read back through the SQL function: a call into Python per
    # row and column).
    conn.executemany(
        "INSERT INTO chunks_fts (rowid, heading, text) VALUES (?, ?, ?)",
        [(rowid, h, t) for rowid, (h, t) in zip(rowids, spaced, strict=True)],
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
            "INSERT INTO chunks_fts (chunks_fts, rowid, heading, text) SELECT 'delete', rowid, "
            f"{_FTS_TEXT}(heading), {_FTS_TEXT}(text) FROM chunks WHERE rowid IN ({marks})",
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
