"""``create_rag(...)``: a knowledge base, its ``retrieve`` tool and an agentic answerer in one.

::

    async with create_rag("docs/", path="kb.db") as rag:
        passages = await rag.search("how do I install it?")
        ask = rag.agent(llm)                      # searches, rewrites, searches again, answers
        print(await ask("How do I install from source?"))

The agentic mode is an ``@llm_function`` whose only tool is ``retrieve``: the model decides when
to search, rewrites its query when a search finds nothing useful, repeats up to ``max_searches``
times, and answers citing the passages as ``[n]`` (``source:lines``).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from ..._persist import DatabaseLike
from ..._resource import AsyncResource
from ...decorators import llm_function
from ...exceptions import ConfigError
from ...providers import LLMInterface
from ...tools import FunctionTool
from ._chunk import DocKind
from ._kb import KnowledgeBase
from ._passage import Embedder, IngestReport, Passage, SearchMode
from ._tool import OutputFormat, retrieve_tool

__all__ = ["AGENTIC_PROMPT", "RAG", "create_rag"]

AGENTIC_PROMPT: Final = """\
You answer questions from a knowledge base that you search with the retrieve tool.
Search before you answer. When the passages do not answer the question, rewrite the query
(other words, the names the documents would use, a narrower or broader question) and search
again; split a question with several parts into several searches. You may search at most
MAX_SEARCHES times. Answer only from the passages, cite each fact with the citation of its
passage (source:lines), and say so when the knowledge base does not hold the answer."""


class RAG(AsyncResource):
    """A knowledge base with its ``retrieve`` tool; made by :func:`create_rag`.

    ``async with`` ingests the sources (incrementally: a file unchanged since the last time is
    not read again) and closes the knowledge base at the end.

    Attributes:
        kb: The :class:`KnowledgeBase`.
        tool: The ``retrieve`` tool, for any agent's toolkit.
        report: What the last :meth:`refresh` did (``None`` before).
    """

    def __init__(
        self,
        kb: KnowledgeBase,
        sources: Sequence[str | os.PathLike[str]] = (),
        texts: Mapping[str, str] = {},
        *,
        k: int = 5,
        token_budget: int = 1500,
        mode: SearchMode | None = None,
        tool_name: str = "retrieve",
        output: OutputFormat = "numbered",
    ) -> None:
        self.kb = kb
        self.sources = list(sources)
        self.texts = dict(texts or {})
        self.k = k
        self.token_budget = token_budget
        self.mode = mode
        self.tool: FunctionTool = retrieve_tool(
            kb, k=k, token_budget=token_budget, mode=mode, name=tool_name, output=output
        )
        self.report: IngestReport | None = None

    async def refresh(self) -> IngestReport:
        """Ingest the sources and texts again (only what changed is re-read)."""
        for name, text in self.texts.items():
            await self.kb.add_text(name, text)
        report = await self.kb.ingest(*self.sources) if self.sources else IngestReport()
        self.report = report
        return report

    async def search(self, query: str, k: int | None = None) -> list[Passage]:
        """The best passages for ``query`` (``k`` defaults to the RAG's).

        Raises:
            UserError: If ``k < 1``.
        """
        return await self.kb.search(query, self.k if k is None else k, mode=self.mode)

    async def add(
        self, text: str, source: str | None = None, kind: DocKind = "markdown"
    ) -> IngestReport:
        """Add one document given as text (see :meth:`KnowledgeBase.add`)."""
        return await self.kb.add(text, source, kind)

    async def add_many(
        self, texts: Sequence[str] | Mapping[str, str], kind: DocKind = "markdown"
    ) -> IngestReport:
        """Add documents given as text (see :meth:`KnowledgeBase.add_many`)."""
        return await self.kb.add_many(texts, kind)

    def agent(
        self, llm: LLMInterface, *, max_searches: int = 4, system: str | None = None
    ) -> Callable[[str], Awaitable[str]]:
        """An answerer that searches on its own: ``await ask(question)`` → the cited answer.

        Args:
            llm: The model.
            max_searches: Most rounds of ``retrieve`` calls before it must answer.
            system: Another system prompt (default: :data:`AGENTIC_PROMPT`).
        """
        prompt = system or AGENTIC_PROMPT.replace("MAX_SEARCHES", str(max_searches))

        async def answer(question: str) -> str:
            raise NotImplementedError  # never runs: llm_function answers from the docstring

        # The docstring is the system prompt (braces escaped: it is a template).
        answer.__doc__ = prompt.replace("{", "{{").replace("}", "}}")
        function: Callable[[str], Awaitable[str]] = llm_function(
            llm, toolkit=[self.tool], max_tool_calls=max_searches
        )(answer)
        return function

    async def aclose(self) -> None:
        """Close the knowledge base."""
        await self.kb.aclose()

    async def open(self) -> None:
        """Ingest the sources (``async with`` does); a failure closes the knowledge base."""
        try:
            await self.refresh()
        except BaseException:  # boundary: cleanup, re-raised: the knowledge base is closed
            await self.aclose()
            raise


def create_rag(
    *sources: str | os.PathLike[str] | Sequence[str],
    texts: Mapping[str, str] | Sequence[str] = (),
    path: DatabaseLike = ":memory:",
    embedder: Embedder | None = None,
    k: int = 5,
    token_budget: int = 1500,
    mode: SearchMode | None = None,
    max_chunk_chars: int = 1500,
    tool_name: str = "retrieve",
    output: OutputFormat = "numbered",
    top_k: int | None = None,
    backend: str | None = None,
    **kb_options: Any,
) -> RAG:
    """The one-line entry: ``async with create_rag("docs/") as rag: ...``.

    The seed's spelling works too: ``create_rag(["doc one", "doc two"], top_k=3,
    backend="simple")`` (a list given as a source is a list of documents' texts).

    Args:
        sources: Files and folders to ingest (Markdown, text, code; PDF with ``pypdf``), or
            lists of documents given as text.
        texts: Documents given as text: ``{name: text}``, or a list (named ``doc-1`` ...).
        path: The knowledge base file (default: in memory, gone at the end).
        embedder: For dense and hybrid search (e.g.
            :class:`~simplellmfunc.providers.OpenAIEmbeddings`); ``None``: BM25.
        k: Passages per search.
        token_budget: Most tokens of one ``retrieve`` result.
        mode: ``bm25``, ``dense`` or ``hybrid`` (default: hybrid with an embedder, else BM25).
        max_chunk_chars: Most characters of a passage.
        tool_name: The ``retrieve`` tool's name.
        output: The tool's output: ``numbered``, ``plain`` or ``json``.
        top_k: The seed's name for ``k`` (wins when given).
        backend: The seed's store choice: ``"simple"`` (or ``None``) is this knowledge base
            (SQLite FTS5 BM25, plus ``sqlite-vec`` vectors with an ``embedder``);
            ``"chroma"`` is not built: dense vectors come from ``embedder=`` instead.
        **kb_options: Further :class:`KnowledgeBase` options.

    Raises:
        ConfigError: For another ``backend``; see :class:`KnowledgeBase`.
    """
    if backend not in (None, "simple", "sqlite"):
        hint = " (pass embedder= for dense vectors in sqlite-vec)" if backend == "chroma" else ""
        raise ConfigError(f"unknown RAG backend {backend!r}: use 'simple'{hint}")
    paths = [s for s in sources if isinstance(s, str | os.PathLike)]
    listed = [text for s in sources if not isinstance(s, str | os.PathLike) for text in s]
    named = (
        dict(texts)
        if isinstance(texts, Mapping)
        else {f"doc-{n}": text for n, text in enumerate([*listed, *texts], start=1)}
    )
    if isinstance(texts, Mapping) and listed:
        named.update({f"doc-{n}": text for n, text in enumerate(listed, start=1)})
    kb = KnowledgeBase(path, embedder=embedder, max_chunk_chars=max_chunk_chars, **kb_options)
    return RAG(
        kb,
        paths,
        named,
        k=k if top_k is None else top_k,
        token_budget=token_budget,
        mode=mode,
        tool_name=tool_name,
        output=output,
    )
