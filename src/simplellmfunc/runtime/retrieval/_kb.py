"""KnowledgeBase: ingest files and folders into one SQLite file; search it by BM25, vectors or
both.

Ingestion is incremental. A file whose size and modification time are unchanged is not read; a
file read again with the same content hash is not re-chunked; a changed file is re-chunked and
only its new passages are added (and embedded), passages with an unchanged id keep their row and
their vector. Files that were under an ingested folder and are gone are deleted (``prune``).
Passages without a vector (ingested before an embedder was given) are embedded at the next
ingestion. Ingestions and deletions of one knowledge base run one at a time.

Search modes: ``bm25`` (SQLite FTS5, the default without an embedder), ``dense`` (cosine over
``sqlite-vec``) and ``hybrid`` (both, merged by reciprocal-rank fusion; the default with an
embedder).
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol, TypeVar

import anyio
import anyio.to_thread

from ..._persist import DatabaseLike, SQLiteDatabase, open_database
from ..._resource import AsyncResource
from ..._unicode import replace_surrogates
from ...exceptions import ConfigError, ProviderError, UserError
from . import _index as idx
from ._chunk import Chunk, DocKind, chunk_text
from ._files import FileEntry, Skipped, read_chunks, root_label, walk
from ._vectors import (
    add_vectors,
    delete_vectors,
    has_vectors,
    load_vec,
    missing_vectors,
    nearest,
    vec_driver,
)

__all__ = ["Embedder", "IngestReport", "KnowledgeBase", "Passage", "SearchMode", "SourceInfo"]

SearchMode = Literal["bm25", "dense", "hybrid"]
T = TypeVar("T")
RRF_K: Final = 60  # reciprocal-rank fusion constant (Cormack et al.)
_TEXT_PREFIX: Final = "text:"


class Embedder(Protocol):
    """Turns texts into vectors (:class:`~simplellmfunc.providers.OpenAIEmbeddings` is one)."""

    model: str

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


@dataclass(frozen=True, slots=True)
class Passage:
    """A search hit.

    Attributes:
        id: The chunk's stable id.
        source: Where it comes from (a path relative to the ingested folder's parent).
        heading: The headings above it, or a Python signature, or ``""``.
        start_line: First line in the source (1-based).
        end_line: Last line (inclusive).
        text: The passage.
        score: Higher is better (BM25, cosine similarity, or the fused rank score).
    """

    id: str
    source: str
    heading: str
    start_line: int
    end_line: int
    text: str
    score: float

    @property
    def citation(self) -> str:
        """``source:start-end § heading``."""
        where = f"{self.source}:{self.start_line}-{self.end_line}"
        return f"{where} § {self.heading}" if self.heading else where


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What one :meth:`KnowledgeBase.ingest` did."""

    files: int = 0  #: readable files seen
    added: int = 0  #: new files
    updated: int = 0  #: changed files
    unchanged: int = 0
    deleted: int = 0  #: files gone from an ingested folder
    #: candidates not ingested, each with its reason (links, special files, too large, not text)
    skipped: list[Skipped] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_kept: int = 0  #: unchanged passages of changed files
    embedded: int = 0  #: passages sent to the embedder
    seconds: float = 0.0

    def __str__(self) -> str:
        return (
            f"{self.files} files: {self.added} added, {self.updated} updated, "
            f"{self.unchanged} unchanged, {self.deleted} deleted, {len(self.skipped)} skipped; "
            f"chunks +{self.chunks_added} -{self.chunks_removed} ={self.chunks_kept}; "
            f"{self.embedded} embedded; {self.seconds:.2f}s"
        ) + "".join(f"\n  skipped {entry}" for entry in self.skipped)


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """An ingested source: what citations call it, its file, and how many passages it has."""

    source: str
    path: str
    chunks: int
    size: int


@dataclass(slots=True)
class _Change:
    entry: FileEntry
    sha256: str
    chunks: list[Chunk]
    new: bool


@dataclass(slots=True)
class _Plan:
    changes: list[_Change] = field(default_factory=list)
    touched: list[tuple[FileEntry, str, int]] = field(default_factory=list)  # same content
    gone: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0
    unchanged: int = 0


Row = idx.Row
_EMIT_BATCH: Final = 16  # files whose chunks are handed to the writer together


class _ReaderStopped(Exception):
    """The ingestion's writer stopped early: the reader thread ends (never seen outside)."""


def _passage(row: Row, score: float | None = None) -> Passage:
    return Passage(*row[:6], score=row[6] if score is None else score)


def _embed_text(heading: str, text: str) -> str:
    """What is embedded for a passage: its heading (when it has one) above its text."""
    return f"{heading}\n{text}" if heading else text


def _text_name(text: str) -> str:
    """The default source of a document added as text: ``doc-`` and a content hash."""
    digest = hashlib.sha256(replace_surrogates(text).encode("utf-8")).hexdigest()
    return f"doc-{digest[:12]}"


def rrf(rankings: Sequence[Sequence[Row]], k: int) -> list[Passage]:
    """Reciprocal-rank fusion: each list gives ``1 / (RRF_K + rank)`` to its rows; the ``k``
    best sums."""
    scores: dict[str, float] = {}
    rows: dict[str, Row] = {}
    for ranking in rankings:
        for rank, row in enumerate(ranking, start=1):
            scores[row[0]] = scores.get(row[0], 0.0) + 1.0 / (RRF_K + rank)
            rows.setdefault(row[0], row)
    best = sorted(scores, key=lambda ident: -scores[ident])[:k]
    return [_passage(rows[ident], scores[ident]) for ident in best]


class KnowledgeBase(AsyncResource):
    """A searchable collection of passages in one SQLite file.

    Args:
        path: The database file (folders are created), ``":memory:"``, or a shared
            :class:`~simplellmfunc.runtime.SQLiteDatabase`.
        embedder: Makes vectors for dense and hybrid search (e.g.
            :class:`~simplellmfunc.providers.OpenAIEmbeddings`); needs ``sqlite-vec`` (the
            ``[rag]`` extra). Without one, search is BM25 only.
        max_chunk_chars: Target passage size in characters.
        offload: Keep the event loop free while a large index is searched (the default): a
            search's SQLite work runs in the caller's thread for at most ``offload_after``
            seconds of CPU time, and one that takes longer is interrupted and run again in a
            worker thread (see :meth:`SQLiteDatabase.aread
            <simplellmfunc.runtime.SQLiteDatabase.aread>`). ``False`` always runs it in the
            caller's thread (the ``rag search`` command, where nothing else shares the loop).
            Ingestion is always offloaded.
        offload_after: The most CPU time a search may take on the event loop's thread
            (default 10 ms; ten times that by the clock, 100 ms: asyncio's slow-callback
            threshold); ``0`` sends every search to a worker thread.

    Raises:
        ConfigError: If the file cannot be opened, or an embedder is given and ``sqlite-vec``
            cannot be loaded here, or the file holds vectors of another embedding model.
    """

    def __init__(
        self,
        path: DatabaseLike = ":memory:",
        *,
        embedder: Embedder | None = None,
        max_chunk_chars: int = 1500,
        offload: bool = True,
        offload_after: float = 0.01,
    ) -> None:
        if max_chunk_chars < 100:
            raise ConfigError(f"max_chunk_chars must be at least 100, got {max_chunk_chars}")
        if offload_after < 0:
            raise ConfigError(f"offload_after must be at least 0, got {offload_after}")
        self.embedder = embedder
        self.max_chunk_chars = max_chunk_chars
        self.offload = offload
        self.offload_after = offload_after
        self._writing = anyio.Lock()  # one ingestion or deletion at a time: plans read state
        driver, self._vec = self._driver(embedder is not None)
        if isinstance(path, str | os.PathLike) and str(path) != ":memory:":
            path = Path(path).expanduser()
        self._db, self._owned = open_database(path, idx.SCHEMA, durable=False, driver=driver)
        try:
            if self._vec:
                self._vec = self._load_vec(needed=embedder is not None)
            if not self._vec and self._db.read(has_vectors):
                raise ConfigError(
                    f"{self._db.path} holds vectors: opening it needs sqlite-vec "
                    "(pip install 'simplellmfunc[rag]')"
                )
            self._db.read(idx.register_functions)
            self._db.write(idx.migrate)
            if embedder is not None:
                self._db.write(self._check_model)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _driver(needed: bool) -> tuple[Any, bool]:
        try:
            return vec_driver(), True
        except ConfigError:
            if needed:
                raise
            return None, False

    def _load_vec(self, *, needed: bool) -> bool:
        try:
            self._db.read(load_vec)
        except ConfigError:  # a shared database on a driver that cannot load it
            if needed:
                raise
            return False
        return True

    def _check_model(self, conn: Any) -> None:
        assert self.embedder is not None
        stored = idx.get_meta(conn, "embedding_model")
        url = getattr(self.embedder, "base_url", None)
        if stored is None or not has_vectors(conn):
            idx.set_meta(conn, "embedding_model", self.embedder.model)
            if isinstance(url, str):
                idx.set_meta(conn, "embedding_url", url)
        elif stored != self.embedder.model:
            raise ConfigError(
                f"{self._db.path}: its vectors come from the embedding model {stored!r}, "
                f"not {self.embedder.model!r}"
            )

    @property
    def database(self) -> SQLiteDatabase:
        """The SQLite database (to share, or to inspect)."""
        return self._db

    def embedding_endpoint(self) -> tuple[str | None, str | None]:
        """The embedding API root and model the vectors were made with (``None``: none)."""
        return self._db.read(
            lambda conn: (
                idx.get_meta(conn, "embedding_url"),
                idx.get_meta(conn, "embedding_model"),
            )
        )

    @property
    def default_mode(self) -> SearchMode:
        """``hybrid`` with an embedder, else ``bm25``."""
        return "hybrid" if self.embedder is not None else "bm25"

    # -- ingestion ---------------------------------------------------------------------------

    async def ingest(self, *targets: str | os.PathLike[str], prune: bool = True) -> IngestReport:
        """Add or refresh files and folders (Markdown, text, code; PDF with ``pypdf``).

        Args:
            targets: Files and folders.
            prune: Delete files that were ingested from these folders and are gone.

        Raises:
            UserError: If a target does not exist.
            ProviderError: If the embedder fails (nothing of this ingestion is kept).
        """
        started = time.perf_counter()
        async with self._writing:
            known, labels = await self._db.aread(
                lambda conn: (idx.known_files(conn), idx.root_labels(conn))
            )
            if self.embedder is None:
                return await self._ingest_streaming(targets, known, labels, prune, started)
            plan = await anyio.to_thread.run_sync(self._plan, targets, known, labels, prune)
            return await self._apply(plan, started)

    async def _ingest_streaming(
        self,
        targets: Sequence[str | os.PathLike[str]],
        known: dict[str, tuple[int, int, str, str]],
        labels: dict[str, str],
        prune: bool,
        started: float,
    ) -> IngestReport:
        """Ingest without an embedder: files are read and chunked in one thread while the
        chunks of those before are indexed in another, in the one transaction.

        The two take turns on the GIL: the reader hands over a batch and waits until the
        writer has written its rows and starts indexing them, which SQLite does without the
        GIL. Were the reader free to run while the writer's many short statements run, each
        statement would wait up to the interpreter's switch interval (5 ms) to get the GIL
        back from it."""
        batches: queue.SimpleQueue[list[_Change] | BaseException | None] = queue.SimpleQueue()
        turn = threading.Semaphore(0)  # the reader's turn to chunk the next batch
        parked = threading.Semaphore(0)  # the reader handed something over and waits
        stopped = threading.Event()  # the writer stopped early: the reader ends
        plan = _Plan()

        def emit(batch: list[_Change]) -> None:
            batches.put(batch)
            parked.release()
            turn.acquire()
            if stopped.is_set():
                raise _ReaderStopped

        def produce() -> None:
            try:
                self._plan(targets, known, labels, prune, plan=plan, emit=emit)
                batches.put(None)
            except _ReaderStopped:
                return
            except BaseException as exc:  # boundary: handed to the writer, which raises it
                batches.put(exc)
            parked.release()

        def consume(conn: Any) -> tuple[int, int, int]:
            # The reader runs beside this writer and is joined before the transaction ends,
            # whatever happens.
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
                        c.entry.path: {} if c.new else idx.chunk_rowids(conn, c.entry.path)
                        for c in batch
                    }
                    added += sum(
                        c.id not in existing[ch.entry.path] for ch in batch for c in ch.chunks
                    )
                    dropped, stay = self._write_changes(
                        conn, batch, existing, {}, before_index=hand_over
                    )
                    if not handed:  # nothing to index in this batch
                        turn.release()
                    removed, kept = removed + dropped, kept + stay
                return removed + self._write_rest(conn, plan), kept, added
            finally:
                stopped.set()
                turn.release()  # a reader waiting for its turn wakes up and ends
                reader.join()

        removed, kept, fresh = await self._db.awrite(consume)
        added = sum(c.new for c in plan.changes)
        return IngestReport(
            files=plan.files,
            added=added,
            updated=len(plan.changes) - added,
            unchanged=plan.unchanged,
            deleted=len(plan.gone),
            skipped=plan.skipped,
            chunks_added=fresh,
            chunks_removed=removed,
            chunks_kept=kept,
            embedded=0,
            seconds=time.perf_counter() - started,
        )

    async def add_text(self, source: str, text: str, kind: DocKind = "markdown") -> IngestReport:
        """Add (or replace) a document given as text, cited as ``source``.

        Text that is not valid Unicode (a lone surrogate, as ``os.listdir`` or a cut JSON
        escape gives) is stored with U+FFFD in its place.
        """
        return await self._add_texts([(source, text)], kind)

    async def add(
        self, text: str, source: str | None = None, kind: DocKind = "markdown"
    ) -> IngestReport:
        """Add one document given as text (the seed's ``store.add``); cited as ``source``, by
        default ``doc-`` and the start of its content hash (the same text is added once)."""
        return await self._add_texts([(source or _text_name(text), text)], kind)

    async def add_many(
        self, texts: Iterable[str] | Mapping[str, str], kind: DocKind = "markdown"
    ) -> IngestReport:
        """Add documents given as text in one ingestion: ``{source: text}``, or texts named as
        :meth:`add` names them."""
        items = (
            list(texts.items())
            if isinstance(texts, Mapping)
            else [(_text_name(t), t) for t in texts]
        )
        return await self._add_texts(items, kind)

    async def _add_texts(self, items: Sequence[tuple[str, str]], kind: DocKind) -> IngestReport:
        started = time.perf_counter()
        async with self._writing:
            known = await self._db.aread(idx.known_files)
            plan = _Plan()
            for raw_source, raw_text in items:
                source, text = replace_surrogates(raw_source), replace_surrogates(raw_text)
                path = _TEXT_PREFIX + source
                data = text.encode("utf-8")
                entry = FileEntry(path, source, "", len(data), 0)
                sha = hashlib.sha256(data).hexdigest()
                plan.files += 1
                if path in known and known[path][2] == sha:
                    plan.unchanged += 1
                    continue
                chunks = chunk_text(text, source, kind, max_chars=self.max_chunk_chars)
                plan.changes = [c for c in plan.changes if c.entry.path != path]
                plan.changes.append(_Change(entry, sha, chunks, path not in known))
            return await self._apply(plan, started)

    def _plan(
        self,
        targets: Sequence[str | os.PathLike[str]],
        known: dict[str, tuple[int, int, str, str]],
        labels: dict[str, str],
        prune: bool,
        *,
        plan: _Plan | None = None,
        emit: Callable[[list[_Change]], None] | None = None,
    ) -> _Plan:
        """What to ingest; ``emit`` is handed the changes as they are found, in batches."""
        plan = _Plan() if plan is None else plan
        sent = 0
        seen: set[str] = set()
        roots: list[str] = []
        taken = set(labels.values())
        for target in targets:
            root = Path(target).expanduser().resolve()
            label = labels.get(str(root))
            if label is None:  # a new root: a label no other root has
                label = root_label(root, taken)
                taken.add(label)
            try:
                entries = list(walk(target, label))
            except FileNotFoundError:
                raise UserError(f"nothing to ingest at {os.fspath(target)!r}") from None
            roots.append(str(root))
            for entry in entries:
                if isinstance(entry, Skipped):
                    plan.skipped.append(entry)
                elif entry.path not in seen:
                    seen.add(entry.path)
                    self._plan_file(plan, entry, known.get(entry.path))
                    if emit is not None and len(plan.changes) - sent >= _EMIT_BATCH:
                        emit(plan.changes[sent:])
                        sent = len(plan.changes)
        if emit is not None and len(plan.changes) > sent:
            emit(plan.changes[sent:])
        if prune:
            plan.gone = [
                path
                for path, (*_, root) in known.items()
                if path not in seen and any(root == r or path.startswith(r + os.sep) for r in roots)
            ]
        return plan

    def _plan_file(
        self, plan: _Plan, entry: FileEntry, old: tuple[int, int, str, str] | None
    ) -> None:
        if old is not None and (old[0], old[1]) == (entry.size, entry.mtime_ns):
            plan.files += 1
            plan.unchanged += 1
            return
        try:
            read = read_chunks(entry, self.max_chunk_chars)
        except OSError as exc:
            read = Skipped(entry.source, f"cannot be read: {exc.strerror or exc}")
        if isinstance(read, Skipped):
            plan.skipped.append(read)
            return
        plan.files += 1
        sha, chunks = read
        if old is not None and old[2] == sha:
            plan.unchanged += 1
            plan.touched.append((entry, sha, len(chunks)))
        else:
            plan.changes.append(_Change(entry, sha, chunks, old is None))

    async def _apply(self, plan: _Plan, started: float) -> IngestReport:
        existing = await self._db.aread(
            lambda conn: {c.entry.path: idx.chunk_rowids(conn, c.entry.path) for c in plan.changes}
        )
        fresh = [
            chunk
            for change in plan.changes
            for chunk in change.chunks
            if chunk.id not in existing[change.entry.path]
        ]
        vectors: list[list[float]] = []
        fresh_vectors: dict[str, list[float]] = {}
        if self.embedder is not None and fresh:
            vectors = await self._embed([_embed_text(c.heading, c.text) for c in fresh])
            fresh_vectors = {c.id: v for c, v in zip(fresh, vectors, strict=True)}
        counts = await self._db.awrite(
            lambda conn: self._write(conn, plan, existing, fresh_vectors)
        )
        backfilled = await self._backfill() if self.embedder is not None else 0
        added = sum(c.new for c in plan.changes)
        return IngestReport(
            files=plan.files,
            added=added,
            updated=len(plan.changes) - added,
            unchanged=plan.unchanged,
            deleted=len(plan.gone),
            skipped=plan.skipped,
            chunks_added=len(fresh),
            chunks_removed=counts[0],
            chunks_kept=counts[1],
            embedded=len(vectors) + backfilled,
            seconds=time.perf_counter() - started,
        )

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        """The embedder's vectors for ``texts``, one each.

        Raises:
            ProviderError: If the embedder fails, or answers another number of vectors (a
                passage must not be kept without its vector, nor with another's).
        """
        assert self.embedder is not None
        vectors = await self.embedder.embed(texts)
        if len(vectors) != len(texts):
            raise ProviderError(
                f"the embedder {self.embedder.model!r} returned {len(vectors)} vectors for "
                f"{len(texts)} texts",
                provider="embeddings",
            )
        return vectors

    async def _backfill(self) -> int:
        """Embed the passages that have no vector yet (a knowledge base built without an
        embedder, given one now); how many."""
        assert self.embedder is not None
        missing = await self._db.aread(missing_vectors)
        if not missing:
            return 0
        vectors = await self._embed([_embed_text(h, t) for _, h, t in missing])
        rowids = [rowid for rowid, _, _ in missing]
        await self._db.awrite(lambda conn: add_vectors(conn, rowids, vectors))
        return len(missing)

    def _write(
        self,
        conn: Any,
        plan: _Plan,
        existing: dict[str, dict[str, int]],
        vectors: dict[str, list[float]],
    ) -> tuple[int, int]:
        gone = self._write_rest(conn, plan)
        removed, kept = self._write_changes(conn, plan.changes, existing, vectors)
        return gone + removed, kept

    def _write_changes(
        self,
        conn: Any,
        changes: Sequence[_Change],
        existing: dict[str, dict[str, int]],
        vectors: dict[str, list[float]],
        *,
        before_index: Callable[[], None] | None = None,
    ) -> tuple[int, int]:
        """Write changed files' chunks; (chunks removed, chunks kept). ``before_index``: see
        :func:`._index.insert_chunks`."""
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
            (rowid, vectors[c.id])
            for rowid, (_, c) in zip(rowids, new, strict=True)
            if c.id in vectors
        ]
        if with_vectors:
            add_vectors(conn, [r for r, _ in with_vectors], [v for _, v in with_vectors])
        return len(removed), kept

    def _write_rest(self, conn: Any, plan: _Plan) -> int:
        """Forget the files gone, record those touched (same content); chunks removed."""
        removed = idx.delete_files(conn, plan.gone)
        delete_vectors(conn, removed)
        for entry, sha, count in plan.touched:
            idx.upsert_file(conn, entry, sha, count)
        return len(removed)

    async def delete(self, *targets: str | os.PathLike[str]) -> int:
        """Forget sources: a file, every file under a folder, or a source as cited (or an
        :meth:`add_text` source). Returns how many files were removed."""
        wanted = [os.fspath(t) for t in targets]

        def work(conn: Any) -> int:
            resolved = [os.path.realpath(os.path.expanduser(t)) for t in wanted]
            rows = list(conn.execute("SELECT path, source FROM files"))
            paths = [
                path
                for path, source in rows
                if source in wanted
                or path in resolved
                or path.removeprefix(_TEXT_PREFIX) in wanted
                or any(path.startswith(r + os.sep) for r in resolved)
            ]
            delete_vectors(conn, idx.delete_files(conn, paths))
            return len(paths)

        async with self._writing:
            return await self._db.awrite(work)

    # -- search ------------------------------------------------------------------------------

    async def search(
        self, query: str, k: int = 5, *, mode: SearchMode | None = None
    ) -> list[Passage]:
        """The ``k`` passages that best match ``query``.

        Args:
            query: Free text (words are matched, stemmed; punctuation is ignored).
            k: How many passages.
            mode: ``bm25``, ``dense`` or ``hybrid`` (default: :attr:`default_mode`).

        Raises:
            UserError: For ``dense`` / ``hybrid`` without an embedder, or ``k < 1``.
            ProviderError: If the embedder fails.
        """
        mode = mode or self.default_mode
        if k < 1:
            raise UserError(f"k must be at least 1, got {k}")
        if mode == "bm25":
            match = idx.fts_query(query)
            rows = await self._search_read(lambda conn: idx.keyword_search(conn, match, k))
            return [_passage(row) for row in rows]
        if self.embedder is None:
            raise UserError(f"{mode} search needs an embedder (KnowledgeBase(embedder=...))")
        (vector,) = await self._embed([query])
        if mode == "dense":
            rows = await self._search_read(lambda conn: nearest(conn, vector, k))
            return [_passage(row) for row in rows]
        pool = max(4 * k, 20)
        match = idx.fts_query(query)

        def both(conn: Any) -> tuple[list[Row], list[Row]]:
            return idx.keyword_search(conn, match, pool), nearest(conn, vector, pool)

        keyword, dense = await self._search_read(both)
        return rrf([keyword, dense], k)

    async def _search_read(self, work: Callable[[Any], T]) -> T:
        if not self.offload:
            return self._db.read(work)
        return await self._db.aread(work, inline_for=self.offload_after)

    async def sources(self) -> list[SourceInfo]:
        """Every ingested source, by name."""
        rows = await self._db.aread(
            lambda conn: list(
                conn.execute("SELECT source, path, chunks, size FROM files ORDER BY source, path")
            )
        )
        return [SourceInfo(*row) for row in rows]

    async def count(self) -> int:
        """How many passages the knowledge base holds."""
        return int(
            await self._db.aread(lambda c: c.execute("SELECT count(*) FROM chunks").fetchone()[0])
        )

    # -- lifetime ----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database (when this object opened it); idempotent."""
        if self._owned:
            self._db.close()

    async def aclose(self) -> None:
        """:meth:`close` (the embedder is the caller's to close)."""
        self.close()

    def __repr__(self) -> str:
        return f"KnowledgeBase({self._db.path!r}, mode={self.default_mode!r})"
