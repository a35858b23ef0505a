"""Writing a plan into the index, in the caller's transaction: changed files' chunks (the
unchanged ones keep their row and their vector), the files gone, the files touched; and
forgetting sources."""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence

from . import _index as idx
from ._chunk import Chunk
from ._plan import TEXT_PREFIX, Change, Plan
from ._vectors import add_vectors, delete_vectors

__all__ = ["delete_sources", "write_changes", "write_plan", "write_rest", "write_streamed"]


def write_plan(
    conn: sqlite3.Connection,
    plan: Plan,
    existing: dict[str, dict[str, int]],
    vectors: dict[str, list[float]],
) -> tuple[int, int]:
    """Write all of ``plan``; (chunks removed, chunks kept)."""
    gone = write_rest(conn, plan)
    removed, kept = write_changes(conn, plan.changes, existing, vectors)
    return gone + removed, kept


class _ReaderStopped(Exception):
    """The ingestion's writer stopped early: the reader thread ends (never seen outside)."""


def write_streamed(
    conn: sqlite3.Connection, plan: Plan, fill: Callable[[Callable[[list[Change]], None]], None]
) -> tuple[int, int, int]:
    """Write ``plan`` while ``fill`` finds its changes: ``fill`` (reading and chunking files)
    runs in a reader thread and hands each batch of changes to the function it is given, and
    each batch is written here as it comes, in the one transaction; an exception of ``fill``
    is raised here (the transaction is rolled back). Returns (chunks removed, chunks kept,
    chunks added).

    The two take turns on the GIL: the reader hands over a batch and waits until the writer
    has written its rows and starts indexing them, which SQLite does without the GIL. Were the
    reader free to run while the writer's many short statements run, each statement would wait
    up to the interpreter's switch interval (5 ms) to get the GIL back from it."""
    batches: queue.SimpleQueue[list[Change] | BaseException | None] = queue.SimpleQueue()
    turn = threading.Semaphore(0)  # the reader's turn to chunk the next batch
    parked = threading.Semaphore(0)  # the reader handed something over and waits
    stopped = threading.Event()  # the writer stopped early: the reader ends

    def emit(batch: list[Change]) -> None:
        batches.put(batch)
        parked.release()
        turn.acquire()
        if stopped.is_set():
            raise _ReaderStopped

    def produce() -> None:
        try:
            fill(emit)
            batches.put(None)
        except _ReaderStopped:
            return
        except BaseException as exc:  # boundary: handed to the writer, which raises it
            batches.put(exc)
        parked.release()

    # The reader runs beside this writer and is joined before the transaction ends, whatever
    # happens.
    reader = threading.Thread(target=produce, name="slf-ingest-reader")
    reader.start()
    try:
        removed = added = kept = 0
        while parked.acquire() and (batch := batches.get()) is not None:
            if isinstance(batch, BaseException):
                raise batch  # the transaction is rolled back: nothing is kept
            handed = False

            def hand_over() -> None:
                nonlocal handed
                handed = True
                turn.release()

            existing = {  # a file new to the knowledge base has no chunks yet
                c.entry.path: {} if c.new else idx.chunk_rowids(conn, c.entry.path) for c in batch
            }
            added += sum(c.id not in existing[ch.entry.path] for ch in batch for c in ch.chunks)
            dropped, stay = write_changes(conn, batch, existing, {}, before_index=hand_over)
            if not handed:  # nothing to index in this batch
                turn.release()
            removed, kept = removed + dropped, kept + stay
        return removed + write_rest(conn, plan), kept, added
    finally:
        stopped.set()
        turn.release()  # a reader waiting for its turn wakes up and ends
        reader.join()


def write_changes(
    conn: sqlite3.Connection,
    changes: Sequence[Change],
    existing: dict[str, dict[str, int]],
    vectors: dict[str, list[float]],
    *,
    before_index: Callable[[], None] | None = None,
) -> tuple[int, int]:
    """Write changed files' chunks (``existing``: each file's chunk ids and rowids now;
    ``vectors``: new chunks' vectors by id); (chunks removed, chunks kept). ``before_index``:
    see :func:`._index.insert_chunks`."""
    kept = 0
    removed: list[int] = []
    new: list[tuple[str, Chunk]] = []
    for change in changes:
        old = existing[change.entry.path]
        ids = {c.id for c in change.chunks}
        dropped = [rowid for ident, rowid in old.items() if ident not in ids]
        idx.delete_chunks(conn, dropped)
        removed += dropped
        stay = [c for c in change.chunks if c.id in old]
        idx.move_chunks(conn, stay)
        kept += len(stay)
        new += [(change.entry.path, c) for c in change.chunks if c.id not in old]
    # Before the inserts: a new chunk may get the rowid of one removed now.
    delete_vectors(conn, removed)
    # Before the inserts too: before_index may hand the GIL over.
    idx.upsert_files(conn, [(c.entry, c.sha256, len(c.chunks)) for c in changes])
    rowids = idx.insert_chunks(conn, new, before_index=before_index)
    with_vectors = [
        (rowid, vectors[c.id]) for rowid, (_, c) in zip(rowids, new, strict=True) if c.id in vectors
    ]
    if with_vectors:
        add_vectors(conn, [r for r, _ in with_vectors], [v for _, v in with_vectors])
    return len(removed), kept


def write_rest(conn: sqlite3.Connection, plan: Plan) -> int:
    """Forget the files gone, record those touched (same content); chunks removed."""
    removed = idx.delete_files(conn, plan.gone)
    delete_vectors(conn, removed)
    for entry, sha, count in plan.touched:
        idx.upsert_file(conn, entry, sha, count)
    return len(removed)


def delete_sources(conn: sqlite3.Connection, wanted: Sequence[str]) -> int:
    """Forget sources: a file, every file under a folder, or a source as cited (or a document
    added as text, by its source); how many files were removed."""
    resolved = [os.path.realpath(os.path.expanduser(t)) for t in wanted]
    rows = list(conn.execute("SELECT path, source FROM files"))
    paths = [
        path
        for path, source in rows
        if source in wanted
        or path in resolved
        or path.removeprefix(TEXT_PREFIX) in wanted
        or any(path.startswith(r + os.sep) for r in resolved)
    ]
    delete_vectors(conn, idx.delete_files(conn, paths))
    return len(paths)
