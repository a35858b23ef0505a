"""The step records of a durable run in DBOS's system database, written the way DBOS writes them.

DBOS runs a step as: check the workflow is not cancelled, look for a recorded output, run, record
(after checking that this execution still owns the workflow): four statements and two thread hops
per step. A :class:`StepJournal` keeps the guarantee with fewer: the workflow reads its recorded
steps once, when an attempt starts (:meth:`StepJournal.load`), and each step that was not recorded
runs and is recorded in one thread hop, through DBOS's own ``record_operation_result``. That write
still checks ownership, and a cancel clears the owner, so a cancelled run or one taken over by
another worker fails at its next record and cannot record a step twice.

This is the one module that uses DBOS internals (its system database and serializer); the
``dbos`` extra pins the minor version (3.4) and ``tests/test_durable*.py`` prove the records resume.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

import anyio
import sqlalchemy as sa
from dbos import DBOS
from dbos._context import current_owner_xid
from dbos._dbos import _get_dbos_instance
from dbos._schemas import SCHEMA_PLACEHOLDER
from dbos._serialization import serialize_exception, serialize_value
from dbos._sys_db import db_retry

from ...exceptions import DurableError

__all__ = ["Recorded", "StepJournal", "close_writers", "now_ms"]


@dataclass(frozen=True, slots=True)
class Recorded:
    """A step recorded by an earlier attempt: its name and its output or error."""

    name: str
    output: Any = None
    error: Exception | None = None

    def replay(self, name: str) -> Any:
        """The recorded output (or raise the recorded error) of a step named ``name``.

        Raises:
            DurableError: If the step recorded here has another name (the run is not
                deterministic: it asks for other steps than the recorded attempt did).
        """
        if name != self.name:
            raise DurableError(
                f"the run asked for step {name!r} where {self.name!r} was recorded: a durable "
                "run must make the same calls in the same order when it resumes"
            )
        if self.error is not None:
            raise self.error
        return self.output


class StepJournal:
    """Reads and writes the step records of the current workflow (create it inside one).

    Args:
        workflow_id: The workflow whose steps these are.
        recorded: The steps recorded when this attempt started (:meth:`load`).
    """

    def __init__(self, workflow_id: str, recorded: dict[int, Recorded]) -> None:
        self.workflow_id = workflow_id
        self.recorded = recorded

    @classmethod
    async def load(cls, workflow_id: str) -> StepJournal:
        """The journal of ``workflow_id`` with the steps recorded so far, in one query read
        outside the workflow's context (so the query is not itself a recorded step)."""

        def read() -> dict[int, Recorded]:
            steps = DBOS.list_workflow_steps(workflow_id, load_output=True)
            return {
                int(step["function_id"]): Recorded(
                    step["function_name"], step["output"], step["error"]
                )
                for step in steps
            }

        # run_in_executor does not copy context variables: DBOS sees no workflow there.
        loop = asyncio.get_running_loop()
        return cls(workflow_id, await loop.run_in_executor(None, read))

    async def record(
        self,
        step_id: int,
        name: str,
        started_ms: int,
        output: Any = None,
        error: Exception | None = None,
    ) -> None:
        """Record the step's output (or the error it raised), in a worker thread.

        Raises:
            DurableError: If this execution no longer owns the workflow (it was cancelled, or
                taken over by another worker): the step is not recorded.
        """
        dbos = _get_dbos_instance()
        if error is not None:
            serialized, serialization = serialize_exception(error, None, dbos._serializer)
            values: tuple[str | None, str | None] = (None, serialized)
        else:
            serialized_output, serialization = serialize_value(output, None, dbos._serializer)
            values = (serialized_output, None)
        row: dict[str, Any] = {
            "workflow_uuid": self.workflow_id,
            "function_id": step_id,
            "function_name": name,
            "output": values[0],
            "error": values[1],
            "serialization": serialization,
            "started_at_epoch_ms": started_ms,
            "completed_at_epoch_ms": now_ms(),
        }
        row["owner_xid"] = current_owner_xid(self.workflow_id)
        writer = _writer(dbos._sys_db)
        if not writer.write_here(row):  # SQLite's write lock was free: written on this thread
            await anyio.to_thread.run_sync(writer.write, row)


class _Writer:
    """The step record: one ``INSERT ... SELECT`` that inserts the row only while this execution
    owns the workflow, compiled once per system database (DBOS builds and compiles its
    statements on every call on SQLite: most of a step's client CPU was that)."""

    def __init__(self, sys_db: Any) -> None:
        status, outputs = sys_db.tables.workflow_status, sys_db.tables.operation_outputs
        self._engine = sys_db.engine
        values = {
            **{key: sa.bindparam(key, required=False) for key in _COLUMNS},
            "child_workflow_id": sa.null(),
            "application_name": sa.literal(sys_db.app_name),
            "retention_timestamp": sa.bindparam("completed_at_epoch_ms", required=False),
        }
        typed = [sa.cast(value, outputs.c[key].type).label(key) for key, value in values.items()]
        # FOR NO KEY UPDATE on Postgres, as DBOS's own owner check: a cancel or a takeover
        # waits for this record to commit. On SQLite the insert holds the write lock.
        owned = (
            sa.select(*typed)
            .where(
                status.c.workflow_uuid == sa.bindparam("workflow_uuid", required=False),
                status.c.owner_xid == sa.bindparam("owner_xid", required=False),
            )
            .with_for_update(key_share=True)
        )
        insert = sa.insert(outputs).from_select(list(values), owned)
        self._insert = _Compiled(insert, self._engine.dialect, sys_db.schema)
        self.write = db_retry(sys_db=sys_db)(self._write)
        url = self._engine.url
        self._sqlite_path = url.database if url.get_backend_name() == "sqlite" else None
        self._here = threading.local()
        self._connections: list[sqlite3.Connection] = []

    def _write(self, row: dict[str, Any]) -> None:
        with self._engine.begin() as connection:
            _check_inserted(self._insert.execute(connection, row).rowcount, row)

    def write_here(self, row: dict[str, Any]) -> bool:
        """Write the record on this thread if that cannot wait: SQLite only, and only when
        its write lock is free at once (a commit in WAL mode is one append to the log, tens of
        microseconds, cheaper than the hop to a worker thread). Return whether it wrote."""
        connection = self._here_connection()
        if connection is None:
            return False
        try:
            connection.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError:  # locked by another writer: wait in a thread instead
            return False
        try:
            inserted = self._insert.execute_dbapi(connection, row).rowcount
            _check_inserted(inserted, row)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
        return True

    def _here_connection(self) -> sqlite3.Connection | None:
        if self._sqlite_path is None:
            return None
        connection: sqlite3.Connection | None = getattr(self._here, "connection", None)
        if connection is None:
            # timeout=0: never waits for a lock. No checkpoints here: DBOS's connections
            # make them, off the event loop. Closed with the writer (a new launch).
            connection = sqlite3.connect(
                self._sqlite_path, timeout=0, isolation_level=None, check_same_thread=False
            )
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA wal_autocheckpoint=0")
            self._here.connection = connection
            self._connections.append(connection)
        return connection

    def close(self) -> None:
        """Close the connections made for writes on the event loop's thread."""
        connections, self._connections = self._connections, []
        for connection in connections:
            connection.close()


def _check_inserted(inserted: int, row: dict[str, Any]) -> None:
    if inserted != 1:
        raise DurableError(
            f"durable run {row['workflow_uuid']!r} is no longer owned by this execution "
            "(cancelled, or resumed elsewhere): its step was not recorded"
        )


class _Compiled:
    """A statement compiled once for ``dialect``, run with the driver's own parameters."""

    def __init__(self, statement: Any, dialect: Any, schema: str | None) -> None:
        compiled = statement.compile(
            dialect=dialect,
            schema_translate_map={SCHEMA_PLACEHOLDER: schema},
            render_schema_translate=True,
        )
        self._sql = str(compiled)
        self._defaults = compiled.construct_params()  # the statement's own constants
        self._order: tuple[str, ...] | None = (
            tuple(compiled.positiontup) if compiled.positional else None
        )

    def execute(self, connection: sa.Connection, values: dict[str, Any]) -> Any:
        return connection.exec_driver_sql(self._sql, self._parameters(values))

    def execute_dbapi(self, connection: sqlite3.Connection, values: dict[str, Any]) -> Any:
        return connection.execute(self._sql, self._parameters(values))

    def _parameters(self, values: dict[str, Any]) -> Any:
        merged = {**self._defaults, **values}
        if self._order is None:
            return merged
        return tuple(merged[k] for k in self._order)


_COLUMNS = (
    "workflow_uuid",
    "function_id",
    "function_name",
    "output",
    "error",
    "serialization",
    "started_at_epoch_ms",
    "completed_at_epoch_ms",
)
_WRITERS: dict[int, _Writer] = {}


def _writer(sys_db: Any) -> _Writer:
    """The writer of ``sys_db`` (one per DBOS launch: a relaunch has a new system database)."""
    writer = _WRITERS.get(id(sys_db))
    if writer is None or writer._engine is not sys_db.engine:
        close_writers()
        writer = _WRITERS[id(sys_db)] = _Writer(sys_db)
    return writer


def close_writers() -> None:
    """Close the step writers' own connections (when DBOS shuts down in this process)."""
    writers = list(_WRITERS.values())
    _WRITERS.clear()
    for writer in writers:
        writer.close()


def now_ms() -> int:
    """The current time in epoch milliseconds (a step's ``started_at``)."""
    return int(time.time() * 1000)
