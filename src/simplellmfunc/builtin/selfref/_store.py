"""SelfReference storage: the per-key state and where it lives (memory or SQLite).

A state store (:class:`StateStore`) keeps one :class:`KeyState` per memory key and saves it whole,
in one transaction per change. The interface is small on purpose (``load``, ``save``, ``keys``,
``close``) so that a store shared by several processes (Redis) can be added later. (These are not
the key-value stores of :mod:`simplellmfunc.runtime`: those hold TTL'd values per namespace.)

SQLite layout: one table ``selfref_state(key TEXT PRIMARY KEY, state TEXT, updated REAL)`` where
``state`` is the JSON of :meth:`KeyState.to_json`, in a
:class:`~simplellmfunc._persist.SQLiteDatabase` (WAL, ``synchronous=FULL``): a committed change
survives a crash or a power loss, and a process killed in the middle of a write leaves the last
committed state readable. The API is synchronous (a save is one small transaction); async callers
run it through ``anyio.to_thread``. One process should own a database file at a time:
:class:`~simplellmfunc.builtin.SelfReference` caches the states it loaded.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..._persist import DatabaseLike, json_text, open_database
from ...exceptions import RunError

__all__ = ["KeyState", "MemoryStateStore", "SQLiteStateStore", "StateStore"]


@dataclass(frozen=True, slots=True)
class KeyState:
    """Everything stored under one memory key (JSON-shaped values, treated as read-only).

    Attributes:
        messages: The history as chat dicts.
        experiences: ``{"id", "text"}`` dicts, oldest first.
        next_experience: The numeric suffix of the next experience id (``exp_<n>``); ids are
            never reused, also after the newest experience was forgotten.
        summaries: Compaction checkpoints, oldest first.
        forks: Fork handles by fork id.
    """

    messages: tuple[Mapping[str, Any], ...] = ()
    experiences: tuple[Mapping[str, str], ...] = ()
    next_experience: int = 1
    summaries: tuple[Mapping[str, Any], ...] = ()
    forks: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """Serialise for storage."""
        return json_text(
            {
                "messages": list(self.messages),
                "experiences": list(self.experiences),
                "next_experience": self.next_experience,
                "summaries": list(self.summaries),
                "forks": dict(self.forks),
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> KeyState:
        """Parse what :meth:`to_json` wrote (fresh objects every time).

        Raises:
            RunError: If the stored text is not a state object.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise RunError(f"corrupt SelfReference state: {exc}") from None
        if not isinstance(data, dict):
            raise RunError("corrupt SelfReference state: not an object")
        return cls(
            tuple(data.get("messages") or ()),
            tuple(data.get("experiences") or ()),
            int(data.get("next_experience") or 1),
            tuple(data.get("summaries") or ()),
            dict(data.get("forks") or {}),
        )


class StateStore(Protocol):
    """Where SelfReference keeps its per-key state. Implementations must be thread-safe."""

    def load(self, key: str) -> KeyState:
        """Return the state of ``key`` (an empty state for an unknown key)."""
        ...

    def save(self, key: str, state: KeyState) -> None:
        """Replace the state of ``key`` atomically (one transaction)."""
        ...

    def keys(self) -> list[str]:
        """Return every stored key, sorted."""
        ...

    def close(self) -> None:
        """Release resources; further calls may fail."""
        ...


class MemoryStateStore:
    """Keeps states in this process as JSON text (so nothing handed out aliases the store)."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def load(self, key: str) -> KeyState:
        """Return the state of ``key`` (an empty state for an unknown key)."""
        with self._lock:
            text = self._data.get(key)
        return KeyState() if text is None else KeyState.from_json(text)

    def save(self, key: str, state: KeyState) -> None:
        """Replace the state of ``key``."""
        text = state.to_json()
        with self._lock:
            self._data[key] = text

    def keys(self) -> list[str]:
        """Return every stored key, sorted."""
        with self._lock:
            return sorted(self._data)

    def close(self) -> None:
        """Nothing to release."""


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS selfref_state ("
    "key TEXT PRIMARY KEY, state TEXT NOT NULL, updated REAL NOT NULL)",
)
_UPSERT = (
    "INSERT INTO selfref_state (key, state, updated) VALUES (?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET state = excluded.state, updated = excluded.updated"
)


class SQLiteStateStore:
    """States in a SQLite database (WAL, ``synchronous=FULL``); every :meth:`save` is one
    transaction.

    Args:
        database: The database file (parent directories must exist), or a shared
            :class:`~simplellmfunc._persist.SQLiteDatabase` (then :meth:`close` leaves it open).

    Raises:
        ConfigError: If the database cannot be opened or initialised.
    """

    def __init__(self, database: DatabaseLike) -> None:
        self.database, self._owned = open_database(database, _SCHEMA, durable=True)

    def load(self, key: str) -> KeyState:
        """Return the state of ``key`` (an empty state for an unknown key).

        Raises:
            RunError: If the database cannot be read.
        """

        def read(conn: sqlite3.Connection) -> Any:
            return conn.execute("SELECT state FROM selfref_state WHERE key = ?", (key,)).fetchone()

        row = self.database.read(read)
        return KeyState() if row is None else KeyState.from_json(row[0])

    def save(self, key: str, state: KeyState) -> None:
        """Replace the state of ``key`` in one committed transaction.

        Raises:
            RunError: If the write fails (the previous state stays intact).
        """
        text = state.to_json()
        self.database.write(lambda conn: conn.execute(_UPSERT, (key, text, time.time())))

    def keys(self) -> list[str]:
        """Return every stored key, sorted.

        Raises:
            RunError: If the database cannot be read.
        """
        rows = self.database.read(
            lambda conn: conn.execute("SELECT key FROM selfref_state ORDER BY key").fetchall()
        )
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the database if this store opened it (idempotent)."""
        if self._owned:
            self.database.close()

    def __repr__(self) -> str:
        return f"SQLiteStateStore({self.database.path!r})"
