"""Trace sinks: where a :class:`~._recorder.TraceRecorder` writes each record as it is made.

* :class:`JSONLSink`: one JSON object per line (``{"trace_id": ..., **record}``), appended and
  flushed per record, so a crashed run leaves every finished step on disk.
* :class:`SQLiteTraceSink`: a ``trace_records`` table in a SQLite file opened through
  :class:`~simplellmfunc._persist.SQLiteDatabase` (shareable with a ``SQLiteStore``);
  each record is one transaction (``synchronous=NORMAL``: never corrupt, a power cut may lose the
  newest records).

Both read back with :func:`read_jsonl` / :meth:`SQLiteTraceSink.read`.
"""

from __future__ import annotations

import json
import sqlite3
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ..._persist import DatabaseLike, ensure_parent, json_text, open_database
from ...exceptions import ConfigError, RunError
from ._record import TraceRecord, record_from_dict

__all__ = ["JSONLSink", "SQLiteTraceSink", "TraceSink", "read_jsonl"]


class TraceSink(ABC):
    """Receives every record of a trace."""

    @abstractmethod
    async def write(self, record: TraceRecord, trace_id: str) -> None:
        """Persist ``record`` of trace ``trace_id``.

        Raises:
            RunError: If it cannot be written.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release the sink's resources (idempotent)."""


class JSONLSink(TraceSink):
    """Appends records to a JSON Lines file (created on the first record).

    Args:
        path: The file; its folders are created with it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: Any = None
        self._closed = False

    async def write(self, record: TraceRecord, trace_id: str) -> None:
        """Append ``record`` as one line and flush it.

        Raises:
            RunError: If the file cannot be written (or the sink was closed).
        """
        if self._closed:
            raise RunError(f"trace sink {str(self.path)!r} is closed")
        line = json_text({"trace_id": trace_id, **record.to_dict()})
        try:
            if self._file is None:
                await anyio.to_thread.run_sync(ensure_parent, self.path)
                self._file = await anyio.open_file(self.path, "a", encoding="utf-8")
            await self._file.write(line + "\n")
            await self._file.flush()
        except (OSError, ConfigError) as exc:
            raise RunError(f"cannot write trace file {str(self.path)!r}: {exc}") from exc

    async def aclose(self) -> None:
        """Close the file (idempotent)."""
        self._closed = True
        file, self._file = self._file, None
        if file is not None:
            await file.aclose()

    def __repr__(self) -> str:
        return f"JSONLSink({str(self.path)!r})"


async def read_jsonl(path: str | Path, trace_id: str | None = None) -> list[TraceRecord]:
    """The records of a JSONL trace file (only those of ``trace_id`` when given).

    Raises:
        ConfigError: If the file cannot be read.
        RunError: If a line is not a trace record.
    """
    try:
        text = await anyio.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read trace file {str(path)!r}: {exc}") from exc
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            raise RunError(f"{path}:{number}: not JSON") from None
        if trace_id is None or data.get("trace_id") == trace_id:
            records.append(record_from_dict(data))
    return records


_TRACE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS trace_records ("
    " trace_id TEXT NOT NULL, step INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL,"
    " started REAL NOT NULL, duration_ms REAL NOT NULL, total_tokens INTEGER NOT NULL,"
    " success INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (trace_id, step))",
)


class SQLiteTraceSink(TraceSink):
    """Writes records to the ``trace_records`` table of a SQLite database.

    A record whose ``(trace_id, step)`` is already stored is refused (:class:`RunError`): a
    recorder that reloads old records gets a new trace id for that reason.

    Args:
        database: A file path (its folders are created), or a shared
            :class:`~simplellmfunc._persist.SQLiteDatabase`.

    Raises:
        ConfigError: If the database cannot be opened or initialised.
    """

    def __init__(self, database: DatabaseLike) -> None:
        self.database, self._owned = open_database(database, _TRACE_SCHEMA, durable=False)

    async def write(self, record: TraceRecord, trace_id: str) -> None:
        """Insert ``record`` (one transaction).

        Raises:
            RunError: If the insert fails.
        """
        row = (
            trace_id,
            record.step,
            record.kind,
            record.name,
            record.started,
            record.duration_ms,
            record.total_tokens,
            int(record.success),
            json_text(record.to_dict()),
        )

        def work(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO trace_records VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)

        await self.database.awrite(work, durable=False)

    async def read(self, trace_id: str | None = None) -> list[TraceRecord]:
        """The stored records, ordered by trace and step (only ``trace_id``'s when given).

        Raises:
            RunError: If the read fails or a row is corrupt.
        """

        def work(conn: sqlite3.Connection) -> list[Any]:
            if trace_id is None:
                query = "SELECT record FROM trace_records ORDER BY trace_id, step"
                return conn.execute(query).fetchall()
            query = "SELECT record FROM trace_records WHERE trace_id = ? ORDER BY step"
            return conn.execute(query, (trace_id,)).fetchall()

        rows = await self.database.aread(work)
        return [record_from_dict(json.loads(r[0])) for r in rows]

    async def trace_ids(self) -> list[str]:
        """Every stored trace id, sorted.

        Raises:
            RunError: If the read fails.
        """

        def work(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT DISTINCT trace_id FROM trace_records ORDER BY 1")
            return [r[0] for r in rows.fetchall()]

        return await self.database.aread(work)

    async def aclose(self) -> None:
        """Close the database if this sink opened it (idempotent)."""
        if self._owned:
            self.database.close()

    def __repr__(self) -> str:
        return f"SQLiteTraceSink({self.database.path!r})"
