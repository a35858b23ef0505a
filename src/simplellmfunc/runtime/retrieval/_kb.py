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

import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import anyio
import anyio.to_thread

from ..._persist import DatabaseLike, SQLiteDatabase, open_database
from ..._resource import AsyncResource
from ...exceptions import ConfigError, ProviderError, UserError
from . import _index as idx
from ._chunk import DocKind
from ._index import Row
from ._passage import Embedder, IngestReport, Passage, SearchMode, SourceInfo, passage, rrf
from ._plan import Change, Known, Plan, plan_targets, plan_texts, report, text_name
from ._vectors import add_vectors, has_vectors, load_vec, missing_vectors, nearest, vec_driver
from ._write import delete_sources, write_plan, write_streamed

__all__ = ["KnowledgeBase"]

T = TypeVar("T")


def _embed_text(heading: str, text: str) -> str:
    """What is embedded for a passage: its heading (when it has one) above its text."""
    return f"{heading}\n{text}" if heading else text


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
        self._db, self._owned = open_database(
            path, idx.SCHEMA, durable=False, driver=driver, page_size=idx.PAGE_SIZE
        )
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
        except BaseException:  # boundary: cleanup, re-raised: the database is closed
            self.close()
            raise

    @staticmethod
    def _driver(needed: bool) -> tuple[ModuleType | None, bool]:
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

    def _check_model(self, conn: sqlite3.Connection) -> None:
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
            plan = await anyio.to_thread.run_sync(
                plan_targets, targets, known, labels, prune, self.max_chunk_chars
            )
            return await self._apply(plan, started)

    async def _ingest_streaming(
        self,
        targets: Sequence[str | os.PathLike[str]],
        known: Known,
        labels: dict[str, str],
        prune: bool,
        started: float,
    ) -> IngestReport:
        """Ingest without an embedder: files are read and chunked in one thread while the
        chunks of those before are written in another (:func:`write_streamed`)."""
        plan = Plan()

        def fill(emit: Callable[[list[Change]], None]) -> None:
            plan_targets(targets, known, labels, prune, self.max_chunk_chars, plan=plan, emit=emit)

        removed, kept, fresh = await self._db.awrite(lambda conn: write_streamed(conn, plan, fill))
        return report(plan, added=fresh, removed=removed, kept=kept, embedded=0, started=started)

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
        return await self._add_texts([(source or text_name(text), text)], kind)

    async def add_many(
        self, texts: Iterable[str] | Mapping[str, str], kind: DocKind = "markdown"
    ) -> IngestReport:
        """Add documents given as text in one ingestion: ``{source: text}``, or texts named as
        :meth:`add` names them."""
        items = (
            list(texts.items())
            if isinstance(texts, Mapping)
            else [(text_name(t), t) for t in texts]
        )
        return await self._add_texts(items, kind)

    async def _add_texts(self, items: Sequence[tuple[str, str]], kind: DocKind) -> IngestReport:
        started = time.perf_counter()
        async with self._writing:
            known = await self._db.aread(idx.known_files)
            return await self._apply(plan_texts(items, known, kind, self.max_chunk_chars), started)

    async def _apply(self, plan: Plan, started: float) -> IngestReport:
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
        counts = await self._db.awrite(lambda conn: write_plan(conn, plan, existing, fresh_vectors))
        backfilled = await self._backfill() if self.embedder is not None else 0
        return report(
            plan,
            added=len(fresh),
            removed=counts[0],
            kept=counts[1],
            embedded=len(vectors) + backfilled,
            started=started,
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

    async def delete(self, *targets: str | os.PathLike[str]) -> int:
        """Forget sources: a file, every file under a folder, or a source as cited (or an
        :meth:`add_text` source). Returns how many files were removed."""
        wanted = [os.fspath(t) for t in targets]
        async with self._writing:
            return await self._db.awrite(lambda conn: delete_sources(conn, wanted))

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
            return [passage(row) for row in rows]
        if self.embedder is None:
            raise UserError(f"{mode} search needs an embedder (KnowledgeBase(embedder=...))")
        (vector,) = await self._embed([query])
        if mode == "dense":
            rows = await self._search_read(lambda conn: nearest(conn, vector, k))
            return [passage(row) for row in rows]
        pool = max(4 * k, 20)
        match = idx.fts_query(query)

        def both(conn: sqlite3.Connection) -> tuple[list[Row], list[Row]]:
            return idx.keyword_search(conn, match, pool), nearest(conn, vector, pool)

        keyword, dense = await self._search_read(both)
        return rrf([keyword, dense], k)

    async def _search_read(self, work: Callable[[sqlite3.Connection], T]) -> T:
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
