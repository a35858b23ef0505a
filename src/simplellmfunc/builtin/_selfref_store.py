"""SelfReference storage: the per-key state and where it lives (memory or SQLite).

A store keeps one :class:`KeyState` per memory key and saves it whole, in one transaction per
change. The interface is small on purpose (``load``, ``save``, ``keys``, ``close``) so that a
store shared by several processes (Redis) can be added later.

SQLite layout: one table ``selfref_state(key TEXT PRIMARY KEY, state TEXT, updated REAL)`` where
``state`` is the JSON of :meth:`KeyState.to_json`. The database runs in WAL mode with
``synchronous=FULL``: a committed change survives a crash or a power loss, and a process killed in
the middle of a write leaves the last committed state readable. The API is synchronous (a save is
one small transaction); async callers run it through ``anyio.to_thread``. One process should own a
database file at a time: :class:`~simplellmfunc.builtin.SelfReference` caches the states it loaded.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..exceptions import ConfigError, RunError

__all__ = ["KeyState", "MemoryStore", "SQLiteStore", "SelfRefStore"]


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
        return json.dumps(
            {
                "messages": list(self.messages),
                "experiences": list(self.experiences),
                "next_experience": self.next_experience,
                "summaries": list(self.summaries),
                "forks": dict(self.forks),
            },
            ensure_ascii=False,
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


class SelfRefStore(Protocol):
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


class MemoryStore:
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
    "key TEXT PRIMARY KEY, state TEXT NOT NULL, updated REAL NOT NULL)"
)
_UPSERT = (
    "INSERT INTO selfref_state (key, state, updated) VALUES (?, ?, ?) "
    "ON CONFLICT(key) DO UPDATE SET state = excluded.state, updated = excluded.updated"
)


class SQLiteStore:
    """A SQLite file (WAL, ``synchronous=FULL``); every :meth:`save` is one transaction.

    Args:
        path: The database file; parent directories must exist.

    Raises:
        ConfigError: If the database cannot be opened or initialised.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            # The connection is shared by the event loop thread and worker threads; the lock
            # serialises every use of it.
            self._conn = sqlite3.connect(
                self.path, check_same_thread=False, isolation_level=None, timeout=30.0
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute(_SCHEMA)
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open SelfReference database {str(self.path)!r}: {exc}"
            ) from exc

    def load(self, key: str) -> KeyState:
        """Return the state of ``key`` (an empty state for an unknown key).

        Raises:
            RunError: If the database cannot be read.
        """
        try:
            with self._lock:
                row = self._conn.execute(
                    "SELECT state FROM selfref_state WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise RunError(f"SelfReference database read failed: {exc}") from exc
        return KeyState() if row is None else KeyState.from_json(row[0])

    def save(self, key: str, state: KeyState) -> None:
        """Replace the state of ``key`` in one committed transaction.

        Raises:
            RunError: If the write fails (the previous state stays intact).
        """
        text = state.to_json()
        try:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    self._conn.execute(_UPSERT, (key, text, time.time()))
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise RunError(f"SelfReference database write failed: {exc}") from exc

    def keys(self) -> list[str]:
        """Return every stored key, sorted.

        Raises:
            RunError: If the database cannot be read.
        """
        try:
            with self._lock:
                rows = self._conn.execute("SELECT key FROM selfref_state ORDER BY key").fetchall()
        except sqlite3.Error as exc:
            raise RunError(f"SelfReference database read failed: {exc}") from exc
        return [r[0] for r in rows]

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"
