"""The one persistence helper: SQLite files and atomic file writes.

Everything the framework persists goes through this module, so every store makes the same
choices.

**SQLite** (:class:`SQLiteDatabase`), used by the runtime stores, the trace sink and the
SelfReference store:

* **WAL journal**: readers never block the writer, and a process killed mid-write leaves the last
  committed state readable.
* **One transaction per write**: :meth:`SQLiteDatabase.write` runs a function inside
  ``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception), so a write is all or nothing.
* **Durability per use**: ``durable=True`` (``synchronous=FULL``) makes a committed write survive
  a power loss; ``durable=False`` (``synchronous=NORMAL``: never corrupt, a power cut may lose the
  newest commits) skips the fsync per commit. Traces use it because they write far more often,
  and a store uses it for the bookkeeping of a read (the LRU "used" mark), so a read costs no
  fsync. The default is the database's; :meth:`SQLiteDatabase.write` may override it.
* **One connection, one lock**: the connection is shared by the event loop thread and worker
  threads; a lock serialises every use. Async callers go through :meth:`aread` / :meth:`awrite`,
  which run the blocking call in a worker thread (``anyio.to_thread``). A latency-sensitive read
  (a search) may first try the caller's thread for a few milliseconds (``aread(inline_for=)``):
  handing work to a thread costs little, but on a loaded machine the event loop's thread, asleep
  while the worker runs, can wait milliseconds to be scheduled again once the result is ready.

Several components may share one :class:`SQLiteDatabase` (pass the instance instead of a path):
a component closes the database only when it opened it itself (:func:`open_database`).

**Files** (:func:`atomic_write`, :func:`write_file_atomic`), used by the file tools, checkpoints
and tool-output spill files: the new content goes to a temporary file in the same directory, is
flushed to disk and renamed over the target. The rename replaces whatever directory entry has the
target's name (a symlink swapped in included) instead of writing through it, readers never see a
half-written file, and the file keeps its permission bits.

**New files** (:func:`create_file_exclusive`), used by numbered checkpoints: the same temporary
file, then hard-linked to the first free name (``link`` fails when the name exists, like
``O_EXCL``), so nothing is ever overwritten and readers never see a half-written file either.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread

from .exceptions import ConfigError, RunError

__all__ = [
    "DatabaseLike",
    "SQLiteDatabase",
    "atomic_write",
    "create_file_exclusive",
    "ensure_parent",
    "fsync_dir",
    "json_text",
    "open_database",
    "write_file_atomic",
]

T = TypeVar("T")

_BUSY_TIMEOUT_S = 30.0  # wait this long for another process's write lock before failing
_WAL_CHECKPOINT_BYTES = 1000 * 4096  # SQLite's automatic checkpoint, in bytes of WAL
_PROGRESS_OPS = 1000  # SQLite VM steps between two deadline checks of an inline read (~0.1 ms)
_INLINE_WALL_FACTOR = 10  # an inline read's wall-clock deadline, in CPU deadlines


class _Overrun(Exception):
    """An inline read did not get the lock, or ran past its deadline (and was interrupted)."""


class SQLiteDatabase:
    """One SQLite file opened for the runtime (WAL, a lock, a transaction per write).

    Args:
        path: The database file (created if missing; parent directories must exist), or
            ``":memory:"`` for a private in-memory database.
        durable: ``synchronous=FULL`` when true, ``NORMAL`` otherwise.
        driver: The DB-API module that opens the file (default :mod:`sqlite3`); a drop-in such as
            ``pysqlite3`` where the standard one cannot load SQLite extensions. Its errors are
            handled as :mod:`sqlite3`'s are.
        page_size: A new file's page size in bytes (a power of two, 512 to 65536; default
            SQLite's, 4096); a file that exists keeps its own. The WAL is checkpointed at the
            size SQLite's default sets whatever the page size (1000 pages of 4096 bytes).

    Raises:
        ConfigError: If the file cannot be opened as a SQLite database.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        durable: bool = True,
        driver: Any = None,
        page_size: int | None = None,
    ) -> None:
        self.path = str(path)
        self.durable = durable
        self._synchronous = durable  # what the connection is set to now
        self._lock = threading.Lock()
        self._closed = False
        module = sqlite3 if driver is None else driver
        self._errors: tuple[type[Exception], ...] = (sqlite3.Error, module.Error)
        try:
            self._conn: sqlite3.Connection = module.connect(
                self.path,
                check_same_thread=False,
                isolation_level=None,  # autocommit: transactions are explicit
                timeout=_BUSY_TIMEOUT_S,
            )
        except self._errors as exc:
            raise ConfigError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        try:
            if page_size is not None:  # before the WAL: the first write fixes the page size
                self._conn.execute(f"PRAGMA page_size={int(page_size)}")
            self._conn.execute("PRAGMA journal_mode=WAL")
            if page_size is not None:
                (actual,) = self._conn.execute("PRAGMA page_size").fetchone()
                self._conn.execute(f"PRAGMA wal_autocheckpoint={_WAL_CHECKPOINT_BYTES // actual}")
            self._conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        except self._errors as exc:
            self._conn.close()
            raise ConfigError(f"cannot open SQLite database {self.path!r}: {exc}") from exc

    def ensure_schema(self, statements: Sequence[str]) -> None:
        """Run ``CREATE … IF NOT EXISTS`` statements in one transaction.

        Raises:
            ConfigError: If the schema cannot be created (not a database, read-only file).
        """
        try:
            self.write(lambda conn: [conn.execute(s) for s in statements])
        except RunError as exc:
            raise ConfigError(f"cannot initialise SQLite database {self.path!r}: {exc}") from exc

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection (no explicit transaction) and return its result.

        Raises:
            RunError: If SQLite fails (closed database, disk error).
        """
        try:
            with self._lock:
                self._check_open()
                return work(self._conn)
        except self._errors as exc:
            raise RunError(f"SQLite read failed on {self.path!r}: {exc}") from exc

    def write(self, work: Callable[[sqlite3.Connection], T], *, durable: bool | None = None) -> T:
        """Run ``work`` inside one ``BEGIN IMMEDIATE`` transaction; commit, or roll back.

        Args:
            work: What to do with the connection.
            durable: Fsync the commit (``None``: the database's default).

        Raises:
            RunError: If SQLite fails; nothing of the transaction is kept.
        """
        want = self.durable if durable is None else durable
        try:
            with self._lock:
                self._check_open()
                if want != self._synchronous:  # a pragma only takes effect between transactions
                    self._conn.execute(f"PRAGMA synchronous={'FULL' if want else 'NORMAL'}")
                    self._synchronous = want
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    result = work(self._conn)
                except BaseException:  # boundary: cleanup, re-raised: rolled back
                    if self._conn.in_transaction:  # some errors already rolled it back
                        self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return result
        except self._errors as exc:
            raise RunError(f"SQLite write failed on {self.path!r}: {exc}") from exc

    async def aread(self, work: Callable[[sqlite3.Connection], T], *, inline_for: float = 0.0) -> T:
        """:meth:`read` in a worker thread.

        Args:
            work: What to read; with ``inline_for``, it must be safe to run twice.
            inline_for: First run ``work`` in the caller's thread, for at most this many
                seconds of that thread's CPU time (and ten times as long by the clock: a
                loaded machine, a read waiting for the disk): a read that finishes in time
                costs no thread switch; one that does not (SQLite interrupts it), or that finds
                the connection busy, is run (again) in a worker thread. ``0``: always in a
                worker thread.

        Raises:
            RunError: If SQLite fails.
        """
        if inline_for > 0:
            with contextlib.suppress(_Overrun):
                return self._read_within(work, inline_for)
        return await anyio.to_thread.run_sync(self.read, work)

    def _read_within(self, work: Callable[[sqlite3.Connection], T], seconds: float) -> T:
        """:meth:`read`, interrupted by SQLite after ``seconds`` of CPU time (or ten times
        that of wall time); never waits for the lock.

        Raises:
            _Overrun: If the lock is taken, or the deadline passed.
            RunError: If SQLite fails otherwise.
        """
        if not self._lock.acquire(blocking=False):
            raise _Overrun
        started = time.perf_counter()
        cpu_deadline = time.thread_time() + seconds
        overrun = False

        def past_deadline() -> bool:  # SQLite's progress handler: true interrupts the statement
            nonlocal overrun
            elapsed = time.perf_counter() - started
            # The CPU clock costs a system call: it is read only once it could have run out.
            overrun = elapsed > _INLINE_WALL_FACTOR * seconds or (
                elapsed > seconds and time.thread_time() > cpu_deadline
            )
            return overrun

        try:
            self._check_open()
            self._conn.set_progress_handler(past_deadline, _PROGRESS_OPS)
            try:
                return work(self._conn)
            finally:
                self._conn.set_progress_handler(None, 0)
        except self._errors as exc:
            if overrun:
                raise _Overrun from exc
            raise RunError(f"SQLite read failed on {self.path!r}: {exc}") from exc
        finally:
            self._lock.release()

    async def awrite(
        self, work: Callable[[sqlite3.Connection], T], *, durable: bool | None = None
    ) -> T:
        """:meth:`write` in a worker thread (a cancelled caller still lets the commit finish).

        Raises:
            RunError: If SQLite fails; nothing of the transaction is kept.
        """
        return await anyio.to_thread.run_sync(lambda: self.write(work, durable=durable))

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _check_open(self) -> None:
        if self._closed:
            raise sqlite3.ProgrammingError("the database is closed")

    def __repr__(self) -> str:
        return f"SQLiteDatabase({self.path!r})"


DatabaseLike = str | Path | SQLiteDatabase
"""A database file path, or an open :class:`SQLiteDatabase` to share."""


def ensure_parent(path: str | Path) -> None:
    """Create the folders ``path`` will live in (nothing if they exist).

    Raises:
        ConfigError: If a folder cannot be created (a file in the way, no permission).
    """
    parent = Path(path).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the folder {str(parent)!r}: {exc.strerror}") from exc


def open_database(
    target: DatabaseLike,
    schema: Sequence[str],
    *,
    durable: bool = True,
    driver: Any = None,
    page_size: int | None = None,
) -> tuple[SQLiteDatabase, bool]:
    """Open ``target`` (or reuse it) and make sure ``schema`` exists; a file path's folders are
    created first, so a configured ``memory/agent.db`` works on a fresh checkout.

    ``driver`` and ``page_size`` are :class:`SQLiteDatabase`'s (ignored for a shared database).

    Returns:
        The database and whether the caller owns it (and so must close it).

    Raises:
        ConfigError: If a folder cannot be created, or the database cannot be opened or
            initialised.
    """
    if isinstance(target, SQLiteDatabase):
        target.ensure_schema(schema)
        return target, False
    if str(target) not in ("", ":memory:"):  # SQLite's private temporary and in-memory databases
        ensure_parent(target)
    database = SQLiteDatabase(target, durable=durable, driver=driver, page_size=page_size)
    try:
        database.ensure_schema(schema)
    except BaseException:  # boundary: cleanup, re-raised: the database is closed
        database.close()
        raise
    return database, True


_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _write_temp(dir_fd: int, data: bytes, mode: int | None) -> str:
    """A new temporary file in ``dir_fd`` holding ``data``, on disk; its name."""
    tmp = f".{secrets.token_hex(8)}.slf-tmp"
    # A new file gets 0o666 filtered by the umask from the kernel, with no racy os.umask() call;
    # an existing file's mode is applied with fchmod before the rename makes it visible.
    fd = os.open(tmp, _TMP_FLAGS, 0o600 if mode is not None else 0o666, dir_fd=dir_fd)
    try:
        try:
            _write_all(fd, data)
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode))
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:  # boundary: cleanup, re-raised: the temporary file is removed
        _unlink_quietly(tmp, dir_fd)
        raise
    return tmp


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass  # already renamed or never created; the original error matters


def atomic_write(dir_fd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """Replace ``name`` in directory ``dir_fd`` with ``data``, atomically.

    Args:
        dir_fd: An open directory fd.
        name: The file name inside that directory (a single component).
        data: The complete new content.
        mode: Permission bits to give the file (the old file's, to keep them); ``None`` for a
            new file, which gets ``0o666`` minus the process umask.

    Raises:
        OSError: If the temporary file cannot be written or renamed; it is removed first.
    """
    tmp = _write_temp(dir_fd, data, mode)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:  # boundary: cleanup, re-raised: the temporary file is removed
        _unlink_quietly(tmp, dir_fd)
        raise
    # Make the rename itself durable.
    os.fsync(dir_fd)


def fsync_dir(directory: str | Path) -> None:
    """Make renames and new entries in ``directory`` durable (where the filesystem allows it)."""
    with contextlib.suppress(OSError):  # not every platform / filesystem allows it
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_file_atomic(path: str | Path, data: bytes | str, *, mode: int | None = None) -> None:
    """Replace the file at ``path`` with ``data`` atomically (see :func:`atomic_write`).

    Text is written as UTF-8; lone surrogates become ``U+FFFD`` rather than failing the write.

    Raises:
        OSError: If the directory cannot be opened or the file cannot be written.
    """
    target = Path(path)
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        atomic_write(fd, target.name, raw, mode)
    finally:
        os.close(fd)


# link() not supported by this filesystem / for this file: fall back to an O_EXCL create.
_NO_LINK = (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _link_new(dir_fd: int, tmp: str, name: str, data: bytes) -> bool:
    """Give ``tmp``'s content the name ``name`` unless it exists; whether it did."""
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return True
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    # No hard links here: an exclusive create (a reader may see it half written).
    try:
        fd = os.open(name, _NEW_FLAGS, 0o666, dir_fd=dir_fd)
    except FileExistsError:
        return False
    try:
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:  # boundary: cleanup, re-raised: the half-written file is removed
        _unlink_quietly(name, dir_fd)  # never leave a half-written file under a taken name
        raise
    return True


def create_file_exclusive(directory: str | Path, names: Iterable[str], data: bytes | str) -> str:
    """Create a file holding ``data`` in ``directory`` under the first of ``names`` that is free.

    The content goes to a temporary file first, which is hard-linked to each name in turn until
    one does not exist yet: nothing is overwritten, and a reader never sees a partly written
    file. Where hard links are not supported, an ``O_EXCL`` create is used instead. ``names`` is
    read lazily, after the content is on disk (a generator may look at the directory then).

    Args:
        directory: An existing directory.
        names: Candidate file names (single components), in order of preference.
        data: The content; text is written as UTF-8.

    Returns:
        The name the file got.

    Raises:
        FileExistsError: If every name is taken.
        OSError: If the directory cannot be opened or the file cannot be written.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        tmp = _write_temp(dir_fd, raw, None)
        try:
            for name in names:
                if _link_new(dir_fd, tmp, name, raw):
                    break
            else:
                raise FileExistsError(f"no free name for a new file in {str(directory)!r}")
        finally:
            _unlink_quietly(tmp, dir_fd)
        os.fsync(dir_fd)  # make the new entry durable
    finally:
        os.close(dir_fd)
    return name


def json_text(value: Any, **options: Any) -> str:
    """``value`` as JSON text that can always be stored: readable UTF-8 (``ensure_ascii=False``),
    unless a string holds a lone surrogate (``os.listdir`` of a non-UTF-8 name, a string cut inside
    a character) — then ``\\uXXXX`` escapes, which SQLite and UTF-8 files accept and
    ``json.loads`` turns back into the same string.

    Raises:
        TypeError, ValueError: For values ``json.dumps`` refuses (with ``options``).
    """
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, **options)
    return text
