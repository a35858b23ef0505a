"""Retrieval: a knowledge base of a docs folder, cited passages, hybrid search, and an agent
that rewrites its query when a search finds nothing.

Runs offline: the documents are written to a temporary folder, the embeddings come from the
mock server's ``/v1/embeddings`` (hashed bag-of-words vectors, not a model) and the model's
replies are scripted. Point ``OpenAIEmbeddings`` at llama.cpp's server (``--embedding``) or any
OpenAI-compatible endpoint for real vectors.
"""

import tempfile
from pathlib import Path

import anyio

from simplellmfunc import OpenAICompatible, create_rag
from simplellmfunc.providers import OpenAIEmbeddings
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

DOCS = {
    "install.md": "# Install\n\nRun `pip install widgets`.\n\n## From source\n\n"
    "Clone the repository, then run `make install`.\n",
    "tuning.md": "# Tuning\n\n## Flux capacitor\n\nSet `warp = 9` in `widgets.toml` to tune the "
    "flux capacitor.\n\n```toml\n# widgets.toml\nwarp = 9\n```\n",
    "api.py": 'def spin(widget, turns=1):\n    """Spin a widget some turns."""\n'
    "    return widget.rotate(360 * turns)\n",
}


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        docs.mkdir()
        for name, text in DOCS.items():
            (docs / name).write_text(text)
        async with (
            MockLLMServer() as server,
            OpenAIEmbeddings("hash-256", server.url, dimensions=256) as embedder,
            OpenAICompatible("sk-demo", "mock", server.url) as llm,
        ):
            kb_file = Path(tmp) / "kb.db"
            async with create_rag(docs, path=kb_file, embedder=embedder, k=2) as rag:
                print(f"ingested: {rag.report}")
                for passage in await rag.search("how do I tune the flux capacitor?"):
                    print(f"hit: {passage.citation}")

                server.script(
                    Reply.tool_calls(ToolCallSpec("retrieve", {"query": "hyperdrive"})),
                    Reply.tool_calls(ToolCallSpec("retrieve", {"query": "flux capacitor warp"})),
                    Reply.text("Set warp = 9 in widgets.toml [docs/tuning.md:5-10]."),
                )
                ask = rag.agent(llm, max_searches=3)
                print(f"answer: {await ask('How do I tune the flux capacitor?')}")
                last = server.requests[-1].json  # the whole conversation, tool results included
                for message in last["messages"]:
                    if message["role"] == "tool":
                        print(f"  retrieve said: {message['content'].splitlines()[0]}")

            (docs / "install.md").write_text(DOCS["install.md"] + "\n## Upgrade\n\nRun it again.\n")
            async with create_rag(docs, path=kb_file, embedder=embedder) as rag:
                print(f"again: {rag.report}")


if __name__ == "__main__":
    anyio.run(main)
