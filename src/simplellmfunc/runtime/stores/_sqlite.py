"""SQLiteStore: the embedded default for persisted items (one file, several processes may share).

Layout: one table ``store_items`` keyed by ``(agent, session, key)``; the namespace is part of
the primary key, so no query can reach another namespace's rows. ``written_seq`` / ``used_seq``
are per-namespace counters that order items by write and by use (timestamps may tie, counters
never do). Every write is one ``BEGIN IMMEDIATE`` transaction through
:class:`~._sqlite.SQLiteDatabase`, also across processes; expired rows of any namespace are
deleted by each write.
"""

from __future__ import annotations

import sqlite3
import time

from ..._persist import DatabaseLike, open_database
from .._clock import Clock
from ._base import Record, Store
from ._namespace import Namespace

__all__ = ["SQLiteStore"]

_STORE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS store_items ("
    " agent TEXT NOT NULL, session TEXT NOT NULL, key TEXT NOT NULL,"
    " value TEXT NOT NULL, written REAL NOT NULL, expires REAL,"
    " written_seq INTEGER NOT NULL, used_seq INTEGER NOT NULL,"
    " PRIMARY KEY (agent, session, key))",
    "CREATE INDEX IF NOT EXISTS store_items_used ON store_items (agent, session, used_seq)",
    "CREATE INDEX IF NOT EXISTS store_items_written ON store_items (agent, session, written_seq)",
    "CREATE INDEX IF NOT EXISTS store_items_expires ON store_items (expires)"
    " WHERE expires IS NOT NULL",
)

_LIVE = "agent = ? AND session = ? AND (expires IS NULL OR expires > ?)"
_NEXT_SEQ = "SELECT COALESCE(MAX(used_seq), 0) + 1 FROM store_items WHERE agent = ? AND session = ?"
_UPSERT = (
    "INSERT INTO store_items"
    " (agent, session, key, value, written, expires, written_seq, used_seq)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (agent, session, key) DO UPDATE SET value = excluded.value,"
    " written = excluded.written, expires = excluded.expires,"
    " written_seq = excluded.written_seq, used_seq = excluded.used_seq"
)
_EVICT = (
    "DELETE FROM store_items WHERE agent = ? AND session = ? AND key IN ("
    " SELECT key FROM store_items WHERE agent = ? AND session = ?"
    " ORDER BY used_seq LIMIT max(0, (SELECT COUNT(*) FROM store_items"
    " WHERE agent = ? AND session = ?) - ?))"
)


def _next_seq(conn: sqlite3.Connection, ns: Namespace) -> int:
    row = conn.execute(_NEXT_SEQ, (ns.agent, ns.session)).fetchone()
    return int(row[0])


class SQLiteStore(Store):
    """Items in a SQLite file (WAL, one transaction per write, fsynced; reads are not).

    Args:
        database: A file path (its folders are created), or a shared
            :class:`~simplellmfunc._persist.SQLiteDatabase` (then closing this store leaves it
            open).
        max_items: Most items per namespace (``None``: unbounded).
        ttl: Default time to live in seconds (``None``: never expire).
        clock: Wall-clock source.

    Raises:
        ConfigError: If the database cannot be opened or initialised.
    """

    def __init__(
        self,
        database: DatabaseLike,
        *,
        max_items: int | None = None,
        ttl: float | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(max_items=max_items, ttl=ttl, clock=clock)
        self.database, self._owned = open_database(database, _STORE_SCHEMA, durable=True)

    async def ping(self) -> None:
        """Nothing to check: opening the file already did (see the constructor)."""

    async def aclose(self) -> None:
        """Close the database if this store opened it (idempotent)."""
        if self._owned:
            self.database.close()

    async def _get(self, ns: Namespace, key: str, now: float) -> Record | None:
        def work(conn: sqlite3.Connection) -> Record | None:
            row = conn.execute(
                f"SELECT value, written, expires FROM store_items WHERE {_LIVE} AND key = ?",
                (ns.agent, ns.session, now, key),
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE store_items SET used_seq = ? WHERE agent = ? AND session = ? AND key = ?",
                (_next_seq(conn, ns), ns.agent, ns.session, key),
            )
            return Record(key, row[0], row[1], row[2])

        # Losing a "used" mark to a power cut is harmless: no fsync for a read.
        return await self.database.awrite(work, durable=False)

    def _put(self, conn: sqlite3.Connection, ns: Namespace, record: Record) -> None:
        conn.execute("DELETE FROM store_items WHERE expires <= ?", (record.written,))
        seq = _next_seq(conn, ns)
        row = (ns.agent, ns.session, record.key, record.payload, record.written, record.expires)
        conn.execute(_UPSERT, (*row, seq, seq))
        if self.max_items is not None:
            names = (ns.agent, ns.session)
            conn.execute(_EVICT, (*names, *names, *names, self.max_items))

    async def _set(self, ns: Namespace, record: Record) -> None:
        await self.database.awrite(lambda conn: self._put(conn, ns, record))

    async def _add(self, ns: Namespace, record: Record) -> Record | None:
        def work(conn: sqlite3.Connection) -> Record | None:
            row = conn.execute(
                f"SELECT value, written, expires FROM store_items WHERE {_LIVE} AND key = ?",
                (ns.agent, ns.session, record.written, record.key),
            ).fetchone()
            if row is not None:
                return Record(record.key, row[0], row[1], row[2])
            self._put(conn, ns, record)
            return None

        # One BEGIN IMMEDIATE transaction: the check and the write, also across processes.
        return await self.database.awrite(work)

    async def _delete(self, ns: Namespace, key: str, now: float) -> bool:
        def work(conn: sqlite3.Connection) -> bool:
            live = conn.execute(
                f"SELECT 1 FROM store_items WHERE {_LIVE} AND key = ?",
                (ns.agent, ns.session, now, key),
            ).fetchone()
            conn.execute(
                "DELETE FROM store_items WHERE agent = ? AND session = ? AND key = ?",
                (ns.agent, ns.session, key),
            )
            return live is not None

        return await self.database.awrite(work)

    async def _items(self, ns: Namespace, now: float, limit: int | None) -> list[Record]:
        def work(conn: sqlite3.Connection) -> list[Record]:
            rows = conn.execute(
                f"SELECT key, value, written, expires FROM store_items WHERE {_LIVE}"
                " ORDER BY written_seq DESC LIMIT ?",
                (ns.agent, ns.session, now, -1 if limit is None else limit),
            ).fetchall()
            return [Record(*row) for row in rows]

        return await self.database.aread(work)

    async def _clear(self, ns: Namespace, now: float) -> int:
        def work(conn: sqlite3.Connection) -> int:
            (live,) = conn.execute(
                f"SELECT COUNT(*) FROM store_items WHERE {_LIVE}", (ns.agent, ns.session, now)
            ).fetchone()
            conn.execute(
                "DELETE FROM store_items WHERE agent = ? AND session = ?", (ns.agent, ns.session)
            )
            return int(live)

        return await self.database.awrite(work)

    def __repr__(self) -> str:
        return f"SQLiteStore({self.database.path!r}, max_items={self.max_items}, ttl={self.ttl})"
