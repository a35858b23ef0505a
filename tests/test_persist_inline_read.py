"""``SQLiteDatabase.aread(inline_for=...)``: a short read runs in the caller's thread; a long one
is interrupted by SQLite and run again in a worker thread; a busy connection is never waited for
on the event loop."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from simplellmfunc.exceptions import RunError
from simplellmfunc.runtime import SQLiteDatabase

# About 50 ms of SQLite work on any machine: far past a 1 ms budget.
LONG = (
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
    "SELECT sum(i) FROM n"
)
COUNT = 300_000


@pytest.fixture
def database(tmp_path: Path) -> Iterator[SQLiteDatabase]:
    db = SQLiteDatabase(tmp_path / "inline.db", durable=False)
    db.ensure_schema(["CREATE TABLE IF NOT EXISTS t (x INTEGER)"])
    yield db
    db.close()


async def test_a_short_read_runs_in_the_callers_thread(database: SQLiteDatabase) -> None:
    threads: list[int] = []

    def work(conn: sqlite3.Connection) -> int:
        threads.append(threading.get_ident())
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])

    assert await database.aread(work, inline_for=1.0) == 0
    assert threads == [threading.get_ident()]
    assert await database.aread(work) == 0  # without a budget: a worker thread
    assert threads[1] != threading.get_ident()


async def test_a_long_read_is_interrupted_and_run_again_in_a_worker(
    database: SQLiteDatabase,
) -> None:
    threads: list[int] = []

    def work(conn: sqlite3.Connection) -> int:
        threads.append(threading.get_ident())
        return int(conn.execute(LONG, (COUNT,)).fetchone()[0])

    assert await database.aread(work, inline_for=0.001) == COUNT * (COUNT + 1) // 2
    assert len(threads) == 2
    assert threads[0] == threading.get_ident() != threads[1]
    # The interruption left nothing behind: the connection serves the next inline read.
    assert await database.aread(lambda c: c.execute("SELECT 7").fetchone()[0], inline_for=1) == 7


async def test_a_busy_connection_sends_the_read_to_a_worker(database: SQLiteDatabase) -> None:
    writing, release = threading.Event(), threading.Event()
    threads: list[int] = []

    def slow_write(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (1)")
        writing.set()
        release.wait(10)

    def read(conn: sqlite3.Connection) -> int:
        threads.append(threading.get_ident())
        return int(conn.execute("SELECT count(*) FROM t").fetchone()[0])

    result: list[int] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(database.awrite, slow_write)
        await anyio.to_thread.run_sync(writing.wait, 10)

        async def reader() -> None:
            result.append(await database.aread(read, inline_for=1.0))

        tg.start_soon(reader)
        await anyio.sleep(0.01)  # the loop runs: the reader did not block it on the lock
        assert not result
        release.set()
    assert result == [1]
    assert len(threads) == 1  # not tried inline: the lock was taken
    assert threads[0] != threading.get_ident()


async def test_an_sqlite_error_inline_is_a_run_error_not_a_retry(database: SQLiteDatabase) -> None:
    calls: list[int] = []

    def bad(conn: sqlite3.Connection) -> None:
        calls.append(1)
        conn.execute("SELECT * FROM missing")

    with pytest.raises(RunError, match="missing"):
        await database.aread(bad, inline_for=1.0)
    assert calls == [1]
    database.close()
    with pytest.raises(RunError, match="closed"):
        await database.aread(lambda c: c.execute("SELECT 1"), inline_for=1.0)
