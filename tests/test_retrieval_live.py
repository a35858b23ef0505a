"""Dense retrieval against a real embeddings server: llama.cpp's ``llama-server --embedding``
(SmolLM2-135M with mean pooling), in ``make test-live``.

A 135M chat model is a poor embedder; the test asks for what any embedder gives: vectors of one
size for every passage, stored in sqlite-vec, and a query that repeats a passage word for word
finds that passage first.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from simplellmfunc.providers import OpenAIEmbeddings
from simplellmfunc.runtime.retrieval import KnowledgeBase

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

DOCS = {
    "cats.md": "# Cats\n\nCats sleep most of the day and purr when they are content.\n",
    "rockets.md": "# Rockets\n\nA rocket engine burns fuel with an oxidizer to make thrust.\n",
    "bread.md": "# Bread\n\nKnead the dough, let it rise, then bake it in a hot oven.\n",
}


async def test_dense_search_with_llama_server_embeddings(tmp_path: Path) -> None:
    from llama_server import build, llama_server

    build()  # idempotent: builds once, then reuses the binary
    for name, text in DOCS.items():
        (tmp_path / "docs").mkdir(exist_ok=True)
        (tmp_path / "docs" / name).write_text(text)
    async with llama_server(extra_args=("--embedding", "--pooling", "mean")) as base_url:
        embedder = OpenAIEmbeddings("SmolLM2-135M-Instruct", f"{base_url}/v1", timeout=180)
        async with embedder, KnowledgeBase(tmp_path / "kb.db", embedder=embedder) as kb:
            report = await kb.ingest(tmp_path / "docs")
            assert report.embedded == 3
            hits = await kb.search(
                "A rocket engine burns fuel with an oxidizer to make thrust.", k=3, mode="dense"
            )
            assert hits[0].source == "docs/rockets.md"
            assert hits[0].score > hits[-1].score
            hybrid = await kb.search("knead the dough", k=1)
            assert hybrid[0].source == "docs/bread.md"
