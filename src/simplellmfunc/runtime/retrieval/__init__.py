"""Retrieval: knowledge bases an agent can search, with citations.

* :class:`KnowledgeBase`: files and folders (Markdown, text, code; PDF text with ``pypdf``)
  chunked along their headings, code blocks and definitions, stored in one SQLite file with an
  FTS5 (BM25) index; re-ingestion reads only what changed and prunes deleted files. With an
  :class:`Embedder` (:class:`~simplellmfunc.providers.OpenAIEmbeddings` for any
  OpenAI-compatible ``/embeddings`` endpoint) passages also get vectors in ``sqlite-vec``, for
  dense search and hybrid search (reciprocal-rank fusion). ``pip install
  'simplellmfunc[rag]'`` for vectors and PDF.
* :func:`retrieve_tool`: the ``retrieve`` tool, cited passages under a token budget.
* :func:`create_rag` → :class:`RAG`: a knowledge base, its tool, and :meth:`RAG.agent`, an
  answerer that searches, rewrites its query and searches again.

The ``simplellmfunc rag ingest|search|list|delete`` commands and the ``knowledge:`` section of
agent config files use the same classes.
"""

from ..._lazy import publish
from ._chunk import Chunk, chunk_text
from ._files import Skipped
from ._kb import KnowledgeBase
from ._passage import Embedder, IngestReport, Passage, SearchMode, SourceInfo
from ._rag import AGENTIC_PROMPT, RAG, create_rag
from ._tool import OutputFormat, format_passages, retrieve_tool

__all__ = [
    "AGENTIC_PROMPT",
    "RAG",
    "Chunk",
    "Embedder",
    "IngestReport",
    "KnowledgeBase",
    "OutputFormat",
    "Passage",
    "SearchMode",
    "Skipped",
    "SourceInfo",
    "chunk_text",
    "create_rag",
    "format_passages",
    "retrieve_tool",
]

publish(__name__, __all__)
