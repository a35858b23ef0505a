"""What a knowledge base hands back: search hits, ingestion reports, sources, and the
embedder it is given; and reciprocal-rank fusion, which merges two rankings of hits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol

from ._files import Skipped
from ._index import Row

__all__ = [
    "RRF_K",
    "Embedder",
    "IngestReport",
    "Passage",
    "SearchMode",
    "SourceInfo",
    "passage",
    "rrf",
]

SearchMode = Literal["bm25", "dense", "hybrid"]
RRF_K: Final = 60  # reciprocal-rank fusion constant (Cormack et al.)


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


def passage(row: Row, score: float | None = None) -> Passage:
    """The hit of an index row (its own score unless ``score`` is given)."""
    return Passage(*row[:6], score=row[6] if score is None else score)


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
    return [passage(rows[ident], scores[ident]) for ident in best]
