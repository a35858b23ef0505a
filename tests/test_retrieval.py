"""Retrieval: chunking, incremental ingestion and deletion in a real SQLite file, BM25 / dense /
hybrid search with vectors from MockLLMServer's ``/v1/embeddings`` over HTTP, the retrieve tool,
the agentic answerer driven through the wire, and PDF text."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from simplellmfunc import OpenAICompatible
from simplellmfunc._cli import main as cli_main
from simplellmfunc.exceptions import ConfigError, ProviderError, UserError
from simplellmfunc.providers import OpenAIEmbeddings
from simplellmfunc.runtime import SQLiteDatabase, load_agent_config, run_config
from simplellmfunc.runtime.config import check_config
from simplellmfunc.runtime.retrieval import (
    KnowledgeBase,
    chunk_text,
    create_rag,
    format_passages,
    retrieve_tool,
)
from simplellmfunc.testing import (
    MockLLMServer,
    RecordedRequest,
    Reply,
    ToolCallSpec,
    key_fingerprint,
)

GUIDE = """\
# Guide

Intro paragraph about the project.

## Install

Install the package with pip.

```bash
# this comment is code, not a heading
pip install frobnicator
```

## Usage

Call frobnicate() to frobnicate a widget.

### Advanced

Tune the flux capacitor with the warp setting.
"""

MODULE = '''\
"""Helpers."""

import os


@cache
def parse_config(path):
    """Read the configuration file."""
    return open(path).read()


class Widget:
    def spin(self):
        return "spinning"
'''


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def bump(path: Path, text: str) -> None:
    """Rewrite ``path`` with a later modification time (a fast file system may keep it)."""
    old = path.stat().st_mtime_ns
    path.write_text(text)
    os.utime(path, ns=(old + 10**9, old + 10**9))


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "kbdocs"
    write(root / "guide.md", GUIDE)
    write(root / "src" / "helpers.py", MODULE)
    write(root / "notes.txt", "First note about caching.\n\nSecond note about zebras.\n")
    write(root / ".hidden" / "secret.md", "# Secret\nnever indexed\n")
    (root / "image.bin").write_bytes(b"\x00\x01binary")
    return root


# --- chunking -----------------------------------------------------------------------------


def test_markdown_chunks_follow_headings_and_keep_code_blocks_whole() -> None:
    chunks = chunk_text(GUIDE, "guide.md", "markdown", max_chars=300)
    lines = GUIDE.splitlines()
    by_heading = {c.heading: c for c in chunks}
    assert list(by_heading) == [
        "Guide",
        "Guide > Install",
        "Guide > Usage",
        "Guide > Usage > Advanced",
    ]
    install = by_heading["Guide > Install"]
    assert "```bash\n# this comment is code, not a heading\npip install frobnicator\n```" in (
        install.text
    )
    for chunk in chunks:  # line ranges point at the text itself
        assert "\n".join(lines[chunk.start_line - 1 : chunk.end_line]) == chunk.text


def test_an_oversized_code_block_is_cut_at_line_ends() -> None:
    code = "\n".join(f"line_{n} = {n}" for n in range(100))
    chunks = chunk_text(f"# Big\n```python\n{code}\n```\n", "big.md", "markdown", max_chars=200)
    assert len(chunks) > 3
    assert all(len(c.text) <= 200 for c in chunks)
    assert all(c.heading == "Big" for c in chunks)
    assert "\n".join(c.text for c in chunks).count("line_") == 100


def test_python_chunks_are_definitions_with_their_decorators() -> None:
    chunks = chunk_text(MODULE, "helpers.py", "python")
    assert [c.heading for c in chunks] == ["", "def parse_config(path)", "class Widget"]
    parse = chunks[1]
    assert parse.text.startswith("@cache\ndef parse_config(path):")
    assert (parse.start_line, parse.end_line) == (6, 9)


def test_ids_are_stable_and_local() -> None:
    first = chunk_text(GUIDE, "guide.md", "markdown", max_chars=300)
    edited = GUIDE.replace("Call frobnicate()", "Call frobnicate(now=True)")
    second = chunk_text("\n\n" + edited, "guide.md", "markdown", max_chars=300)
    assert [c.id for c in first] == [
        c.id for c in chunk_text(GUIDE, "guide.md", "markdown", max_chars=300)
    ]
    kept = {c.id for c in first} & {c.id for c in second}
    assert len(kept) == len(first) - 1  # only the edited section got a new id
    assert {c.start_line for c in second if c.id in kept} == {
        c.start_line + 2 for c in first if c.id in kept
    }
    assert (
        chunk_text("same\n\nsame\n", "t.txt", max_chars=100)[0].id
        != chunk_text("same\n\nsame\n", "u.txt", max_chars=100)[0].id
    )


@pytest.mark.parametrize("max_chars", [80, 300, 1500])
def test_chunks_are_the_same_whatever_the_line_breaks(max_chars: int) -> None:
    # A text broken by "\n" alone is read by searching it whole; one with "\r\n" (or a form
    # feed, a Unicode line separator) line by line, as str.splitlines finds the lines: the
    # chunks must be the same, long lines (cut in pieces) included.
    decoder = Path(json.__file__).with_name("decoder.py").read_text(encoding="utf-8")
    long_def = "def f():\n    x = '" + "y" * 2 * max_chars + "'\n\n\ndef g():\n    pass\n"
    long_heading = "# " + "title " * max_chars + "\n\npara one\n\n## Next\n\ntext\n"
    cases = [
        (GUIDE, "markdown"),
        (long_heading, "markdown"),
        (MODULE, "python"),
        (decoder, "python"),
        (long_def, "python"),
        ("@d\n# c\ndef a():\n  1\n\n  \n\t\n@e\nclass B:\n  pass\n   \n", "python"),
        (decoder, "code"),
        ("First note.\n\n   \nSecond note\nand more.\n\n\n", "text"),
        ("", "text"),
        ("\n", "python"),
    ]
    for text, kind in cases:
        plain = chunk_text(text, "s", kind, max_chars=max_chars, heading="H")
        crlf = chunk_text(text.replace("\n", "\r\n"), "s", kind, max_chars=max_chars, heading="H")
        assert plain == crlf, (kind, text[:40])
        assert bool(plain) == bool(text.strip())
        assert all(len(c.text) <= max_chars for c in plain)
        lines = text.splitlines()
        cut = max(map(len, lines), default=0) >= max_chars  # a chunk may be part of a line
        for c in plain:  # the line range is the chunk's
            region = "\n".join(lines[c.start_line - 1 : c.end_line])
            assert c.text in region if cut else c.text == region.strip("\n"), c


async def test_a_new_knowledge_base_file_has_8_kib_pages_and_an_old_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    def pragmas(kb: KnowledgeBase) -> tuple[int, int]:
        def read(conn: sqlite3.Connection) -> tuple[int, int]:
            size = conn.execute("PRAGMA page_size").fetchone()[0]
            return size, conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]

        return kb.database.read(read)

    async with KnowledgeBase(tmp_path / "new.db") as kb:
        await kb.add_text("a.md", "alpha apples\n")
        # The WAL is checkpointed at SQLite's default size in bytes (1000 pages of 4 KiB).
        assert pragmas(kb) == (8192, 500)
    with closing(sqlite3.connect(tmp_path / "old.db")) as conn:
        conn.execute("CREATE TABLE t (x)")  # a file made with SQLite's default pages
    async with KnowledgeBase(tmp_path / "old.db") as kb:
        await kb.add_text("a.md", "alpha apples\n")
        assert pragmas(kb) == (4096, 1000)
        assert [p.source for p in await kb.search("apples", 1)] == ["a.md"]
    async with KnowledgeBase(tmp_path / "new.db") as kb:  # reopened: still 8 KiB pages
        assert pragmas(kb)[0] == 8192
        assert await kb.count() == 1


# --- ingestion ----------------------------------------------------------------------------


async def test_ingest_is_incremental_and_prunes(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "kb" / "project.db"
    async with KnowledgeBase(db, max_chunk_chars=300) as kb:
        first = await kb.ingest(corpus)
        assert (first.files, first.added, first.chunks_added) == (3, 3, first.chunks_added)
        assert first.skipped == []  # binary and hidden files are not even candidates
        sources = [s.source for s in await kb.sources()]
        assert sources == ["kbdocs/guide.md", "kbdocs/notes.txt", "kbdocs/src/helpers.py"]
        total = await kb.count()

        again = await kb.ingest(corpus)
        assert (again.unchanged, again.added, again.updated, again.chunks_added) == (3, 0, 0, 0)

        bump(corpus / "guide.md", GUIDE.replace("warp setting", "hyperdrive setting"))
        (corpus / "notes.txt").unlink()
        changed = await kb.ingest(corpus)
        assert (changed.updated, changed.unchanged, changed.deleted) == (1, 1, 1)
        assert changed.chunks_added == 1
        assert changed.chunks_kept >= 3
        assert await kb.count() == total - 1  # notes.txt had one chunk; guide swapped one
        # The index matches the table (FTS5 checks every term of every row).
        kb.database.read(
            lambda c: c.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        )
        hits = await kb.search("hyperdrive")
        assert [h.source for h in hits] == ["kbdocs/guide.md"]
        assert await kb.search("warp") == []
        assert await kb.search("zebras") == []

    # The file is the knowledge base: a new process sees the same thing.
    async with KnowledgeBase(db) as kb:
        assert await kb.count() == total - 1
        assert await kb.delete("kbdocs/src/helpers.py") == 1
        assert await kb.delete(corpus) == 1  # a folder: everything under it
        assert await kb.count() == 0
    with closing(sqlite3.connect(db)) as conn:  # the FTS index followed the deletions
        assert conn.execute("SELECT count(*) FROM chunks_fts").fetchone() == (0,)
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")


OLD_TRIGGERS = (  # what files made before the index was kept by statements hold
    """CREATE TRIGGER chunks_ai AFTER INSERT ON chunks BEGIN
        INSERT INTO chunks_fts (rowid, heading, text) VALUES (new.rowid, new.heading, new.text);
        END""",
    """CREATE TRIGGER chunks_ad AFTER DELETE ON chunks BEGIN
        INSERT INTO chunks_fts (chunks_fts, rowid, heading, text)
        VALUES ('delete', old.rowid, old.heading, old.text);
        END""",
)


async def test_a_file_with_the_old_index_triggers_loses_them(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    async with KnowledgeBase(db, max_chunk_chars=300) as kb:
        await kb.ingest(corpus)
    with closing(sqlite3.connect(db)) as conn:
        for trigger in OLD_TRIGGERS:
            conn.execute(trigger)
        conn.commit()
    async with KnowledgeBase(db, max_chunk_chars=300) as kb:  # would index every row twice
        bump(corpus / "guide.md", GUIDE.replace("warp setting", "hyperdrive setting"))
        await kb.ingest(corpus)
        assert [h.source for h in await kb.search("hyperdrive")] == ["kbdocs/guide.md"]
        total = await kb.count()
    with closing(sqlite3.connect(db)) as conn:
        assert (
            conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall() == []
        )
        conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
        assert conn.execute("SELECT count(*) FROM chunks_fts_docsize").fetchone() == (total,)


async def test_a_missing_target_is_a_user_error(tmp_path: Path) -> None:
    async with KnowledgeBase() as kb:
        with pytest.raises(UserError, match="nothing to ingest"):
            await kb.ingest(tmp_path / "nope")


def many_files(root: Path, count: int) -> Path:
    """``count`` small Python files under ``root`` (more than one batch of the reader)."""
    for n in range(count):
        write(root / f"mod{n:03}.py", f'"""Module {n}."""\n\n\ndef f{n}():\n    return {n}\n')
    return root


def reader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "slf-ingest-reader"]


async def test_a_reader_failing_after_some_batches_keeps_nothing(tmp_path: Path) -> None:
    folder = many_files(tmp_path / "many", 70)  # batches written before the reader fails
    async with KnowledgeBase() as kb:
        with pytest.raises(UserError, match="nothing to ingest"):
            await kb.ingest(folder, tmp_path / "nope")
        assert await kb.count() == 0
        assert await kb.sources() == []
        assert reader_threads() == []
        report = await kb.ingest(folder)  # and the next ingestion is whole
        assert (report.added, report.chunks_added) == (70, 140)


async def test_a_writer_failing_mid_ingestion_stops_the_reader(tmp_path: Path) -> None:
    folder = many_files(tmp_path / "many", 70)
    async with KnowledgeBase(tmp_path / "kb.db") as kb:
        # A real failure inside SQLite, in a later batch than the first.
        kb.database.write(
            lambda conn: conn.execute(
                "CREATE TRIGGER boom BEFORE INSERT ON chunks WHEN NEW.source LIKE '%mod050.py' "
                "BEGIN SELECT RAISE(ABORT, 'boom'); END"
            )
        )
        with pytest.raises(Exception, match="boom"):
            await kb.ingest(folder)
        assert reader_threads() == []
        assert await kb.count() == 0
        kb.database.write(lambda conn: conn.execute("DROP TRIGGER boom"))
        assert (await kb.ingest(folder)).chunks_added == 140


async def test_a_changed_file_whose_passages_all_stay(tmp_path: Path) -> None:
    folder = many_files(tmp_path / "many", 3)
    async with KnowledgeBase() as kb:
        await kb.ingest(folder)
        path = folder / "mod001.py"
        bump(path, path.read_text() + "\n\n")  # new content, the same passages
        report = await kb.ingest(folder)
        assert (report.updated, report.chunks_added, report.chunks_kept) == (1, 0, 2)
        assert [p.source for p in await kb.search("f1", 1)] == ["many/mod001.py"]


async def test_bm25_hits_carry_citations(corpus: Path) -> None:
    async with KnowledgeBase(max_chunk_chars=300) as kb:
        await kb.ingest(corpus)
        hit = (await kb.search("How do I install the package with pip?", k=1))[0]
        assert hit.citation == "kbdocs/guide.md:7-12 § Guide > Install"
        code = (await kb.search("parse the configuration file", k=1))[0]
        assert code.citation == "kbdocs/src/helpers.py:6-9 § def parse_config(path)"
        assert await kb.search("?!") == []  # no word, no query
        with pytest.raises(UserError, match="needs an embedder"):
            await kb.search("x", mode="dense")


async def test_every_offload_setting_finds_the_same_passages(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "offload.db"
    async with KnowledgeBase(db, max_chunk_chars=300) as kb:
        await kb.ingest(corpus)
        expected = await kb.search("parse the configuration file install", k=3)
        assert len(expected) == 2
    # Inline, always in a thread, and inline with a budget nothing meets (a search long
    # enough for SQLite to check it is interrupted and run again in a worker thread; see
    # test_persist_inline_read.py for the interruption itself).
    for options in ({"offload": False}, {"offload_after": 0}, {"offload_after": 1e-9}):
        async with KnowledgeBase(db, **options) as kb:  # type: ignore[arg-type]
            assert await kb.search("parse the configuration file install", k=3) == expected
    with pytest.raises(ConfigError, match="offload_after"):
        KnowledgeBase(offload_after=-1)


async def test_texts_and_create_rag(tmp_path: Path) -> None:
    async with create_rag(texts=["Paris is the capital of France.", "Rome is in Italy."]) as rag:
        assert [p.source for p in await rag.search("capital of France")] == ["doc-1"]
        assert (await rag.refresh()).unchanged == 0  # texts are compared by content
        assert await rag.kb.count() == 2


# --- dense and hybrid over /v1/embeddings ------------------------------------------------


def embedding_requests(server: MockLLMServer) -> list[RecordedRequest]:
    return [r for r in server.requests if r.path == "/v1/embeddings"]


async def test_dense_and_hybrid_with_an_embeddings_endpoint(
    corpus: Path, tmp_path: Path, mock_server: MockLLMServer
) -> None:
    db = tmp_path / "dense.db"
    embedder = OpenAIEmbeddings("hash-64", mock_server.url, batch_size=2)
    async with embedder, KnowledgeBase(db, embedder=embedder, max_chunk_chars=300) as kb:
        report = await kb.ingest(corpus)
        assert report.embedded == report.chunks_added > 2
        batches = embedding_requests(mock_server)
        assert all(len(r.json["input"]) <= 2 for r in batches)
        assert kb.default_mode == "hybrid"
        assert kb.embedding_endpoint() == (mock_server.url, "hash-64")
        dense = await kb.search("tune the flux capacitor", k=2, mode="dense")
        assert dense[0].heading == "Guide > Usage > Advanced"
        assert 0.5 < dense[0].score <= 1.0
        hybrid = await kb.search("flux capacitor warp", k=3)
        assert hybrid[0].heading == "Guide > Usage > Advanced"

        mock_server.reset()
        bump(corpus / "guide.md", GUIDE + "\n## Extra\n\nA brand new section.\n")
        update = await kb.ingest(corpus)
        assert update.embedded == 1  # only the new passage went to the endpoint
        assert embedding_requests(mock_server)[0].json["input"] == [
            "Guide > Extra\nA brand new section."
        ]

    # Another embedding model may not reuse the vectors.
    other = OpenAIEmbeddings("other-model", mock_server.url)
    try:
        with pytest.raises(ConfigError, match="embedding model 'hash-64'"):
            KnowledgeBase(db, embedder=other)
    finally:
        await other.aclose()


async def test_a_changed_last_passage_keeps_its_new_vector(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    # The changed passage had the highest rowid: its replacement gets the same one, so the old
    # vector must be gone before the new one is stored.
    embedder = OpenAIEmbeddings("hash-64", mock_server.url)
    cats = "Cats purr softly when they are content, and sleep for most of the day."
    dogs = "Dogs bark loudly at the postman, every single morning, without fail."
    owls = "Owls hoot at night from the old oak tree behind the barn, all year round."
    db = tmp_path / "v.db"
    async with embedder, KnowledgeBase(db, embedder=embedder, max_chunk_chars=100) as kb:
        await kb.add_text("notes", f"{cats}\n\n{dogs}", kind="text")
        await kb.add_text("notes", f"{cats}\n\n{owls}", kind="text")
        assert await kb.count() == 2
        vectors = kb.database.read(lambda c: c.execute("SELECT count(*) FROM chunks_vec"))
        assert vectors.fetchone() == (2,)
        hit = (await kb.search(owls, k=1, mode="dense"))[0]
        assert hit.text == owls
        assert hit.score > 0.99


class ShortEmbedder:
    """An embedder that answers one vector short."""

    model = "short"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[1.0, float(i)] for i in range(len(texts) - 1)]


async def test_an_embedder_that_answers_too_few_vectors_fails_the_ingestion(
    corpus: Path, tmp_path: Path
) -> None:
    async with KnowledgeBase(tmp_path / "short.db", embedder=ShortEmbedder()) as kb:
        with pytest.raises(ProviderError, match=r"'short' returned \d+ vectors for \d+ texts"):
            await kb.ingest(corpus)
        assert await kb.count() == 0  # no passage without its vector
    async with KnowledgeBase(tmp_path / "later.db") as kb:
        await kb.add_text("notes", "One passage.")
    async with KnowledgeBase(tmp_path / "later.db", embedder=ShortEmbedder()) as kb:
        with pytest.raises(ProviderError, match="returned 0 vectors for 1 texts"):
            await kb.add_text("notes", "One passage.")  # unchanged: the backfill checks too
        with pytest.raises(ProviderError, match="returned 0 vectors for 1 texts"):
            await kb.search("one", mode="dense")  # and a query's vector


async def test_an_embeddings_endpoint_that_is_down_fails_the_ingestion(
    corpus: Path, tmp_path: Path
) -> None:
    async with MockLLMServer() as server:
        url = server.url
    embedder = OpenAIEmbeddings("m", url, max_retries=0, timeout=5)
    async with embedder, KnowledgeBase(tmp_path / "down.db", embedder=embedder) as kb:
        with pytest.raises(ProviderError):
            await kb.ingest(corpus)
        assert await kb.count() == 0  # nothing half-written


# --- the retrieve tool and the agentic mode ----------------------------------------------


async def test_retrieve_tool_cites_and_keeps_to_its_budget(corpus: Path) -> None:
    async with KnowledgeBase(max_chunk_chars=300) as kb:
        await kb.ingest(corpus)
        tool = retrieve_tool(kb, k=5, token_budget=60)
        assert tool.spec().name == "retrieve"
        text = await tool.invoke({"query": "frobnicate widget install pip setting"})
        assert text.startswith("[1] kbdocs/guide.md:")
        assert "token budget)" in text  # the rest did not fit
        nothing = await tool.invoke({"query": "quasar"})
        assert "No passage matches 'quasar'. Rewrite the query" in nothing
        one = await kb.search("pip install frobnicator", k=1)
        cut = format_passages(one, token_budget=40)
        assert len(cut) < len(one[0].text)
        assert cut.startswith("[1] kbdocs/guide.md:7-12")
        assert cut.endswith("[…]")


async def test_agentic_mode_rewrites_and_searches_again(
    corpus: Path, mock_server: MockLLMServer
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("retrieve", {"query": "hyperspace quasar"})),
        Reply.tool_calls(ToolCallSpec("retrieve", {"query": "flux capacitor warp"})),
        Reply.text("Use the warp setting [kbdocs/guide.md:20-20]."),
    )
    llm = OpenAICompatible("sk-test", "m", mock_server.url)
    try:
        async with create_rag(corpus, max_chunk_chars=300) as rag:
            ask = rag.agent(llm, max_searches=3)
            answer = await ask("How do I tune the flux capacitor?")
    finally:
        await llm.aclose()
    assert answer == "Use the warp setting [kbdocs/guide.md:20-20]."
    chats = [r for r in mock_server.requests if r.path == "/v1/chat/completions"]
    assert "rewrite the query" in chats[0].json["messages"][0]["content"]
    tool_results = [m["content"] for m in chats[2].json["messages"] if m["role"] == "tool"]
    assert "No passage matches 'hyperspace quasar'" in tool_results[0]
    assert "[1] kbdocs/guide.md:20-20 § Guide > Usage > Advanced" in tool_results[1]


# --- PDF ----------------------------------------------------------------------------------


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica (offsets computed, as a writer would)."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


async def test_pdf_text_is_ingested_by_page(tmp_path: Path) -> None:
    pytest.importorskip("pypdf")
    (tmp_path / "papers").mkdir()
    (tmp_path / "papers" / "paper.pdf").write_bytes(minimal_pdf("Quantum widgets resonate"))
    async with KnowledgeBase() as kb:
        report = await kb.ingest(tmp_path / "papers")
        assert report.added == 1
        hit = (await kb.search("quantum widgets"))[0]
        assert hit.citation == "papers/paper.pdf:1-1 § page 1"


async def test_a_pdf_is_skipped_without_pypdf_and_read_once_it_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pypdf")
    (tmp_path / "paper.pdf").write_bytes(minimal_pdf("Quantum widgets resonate"))
    async with KnowledgeBase() as kb:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, "pypdf", None)  # import pypdf raises ImportError
            report = await kb.ingest(tmp_path)
        assert report.added == 0
        assert [str(s) for s in report.skipped] == [
            f"{tmp_path.name}/paper.pdf: a PDF, and pypdf is not installed"
        ]
        report = await kb.ingest(tmp_path)
        assert report.added == 1


# --- config files and the command line ----------------------------------------------------


async def test_a_config_knowledge_section_gives_the_agent_a_retrieve_tool(
    corpus: Path, tmp_path: Path, mock_server: MockLLMServer
) -> None:
    config = write(
        tmp_path / "agent.yml",
        "model: openai:m\nsystem: Answer from the docs.\n"
        "knowledge:\n  sources: [kbdocs]\n  path: kb/agent.db\n  k: 2\n  tool_name: search_docs\n"
        f"  embeddings: {{model: hash-64, base_url: '{mock_server.url}'}}\n",
    )
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("search_docs", {"query": "flux capacitor"})),
        Reply.text("Tune it with the warp setting."),
    )
    env = {"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": mock_server.url}
    loaded = load_agent_config(config)
    assert loaded.knowledge is not None
    assert loaded.knowledge.sources == [str(corpus)]  # relative to the file
    result = await run_config(config, "How do I tune the flux capacitor?", environ=env)
    assert result.result == "Tune it with the warp setting."
    chats = [r for r in mock_server.requests if r.path == "/v1/chat/completions"]
    assert [t["function"]["name"] for t in chats[0].json["tools"]] == ["search_docs"]
    tool_message = next(m for m in chats[1].json["messages"] if m["role"] == "tool")
    assert "§ Guide > Usage > Advanced" in tool_message["content"]
    assert (tmp_path / "kb" / "agent.db").is_file()
    assert any(r.path == "/v1/embeddings" for r in mock_server.requests)


async def test_the_embeddings_key_variable_is_read_from_the_given_environment(
    tmp_path: Path, mock_server: MockLLMServer
) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "note.md").write_text("# Flux\n\nTune the flux capacitor.\n")
    config = write(
        tmp_path / "agent.yml",
        "model: openai:m\nknowledge:\n  sources: [docs]\n"
        f"  embeddings: {{model: hash-64, base_url: '{mock_server.url}',"
        " api_key_env: ONLY_IN_THIS_ENV_KEY}\n",
    )
    mock_server.script(Reply.text("ok"))
    env = {
        "OPENAI_API_KEY": "sk-test-123456789",
        "OPENAI_BASE_URL": mock_server.url,
        "ONLY_IN_THIS_ENV_KEY": "sk-embed-abcdefgh",
    }
    assert (await run_config(config, "hi", environ=env)).result == "ok"
    embeds = [r for r in mock_server.requests if r.path == "/v1/embeddings"]
    assert embeds
    assert embeds[0].headers["authorization"] == f"Bearer {key_fingerprint('sk-embed-abcdefgh')}"


def rag_cli(*args: str | Path) -> int:
    return cli_main(["rag", *map(str, args)])


def test_rag_commands(
    corpus: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert rag_cli("search", "x", "--kb", "proj") == 2
    assert "no knowledge base 'proj'" in capsys.readouterr().err
    assert rag_cli("ingest", corpus, "--kb", "proj") == 0
    assert capsys.readouterr().out.startswith("3 files: 3 added")
    assert (tmp_path / ".simplellmfunc" / "kb" / "proj.db").is_file()
    assert (
        rag_cli(
            "search", "parse the configuration file", "--kb", "proj", "-k", "1", "--format", "json"
        )
        == 0
    )
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["citation"] == "kbdocs/src/helpers.py:6-9 § def parse_config(path)"
    assert rag_cli("search", "flux capacitor", "--kb", "proj", "-k", "1") == 0
    assert capsys.readouterr().out.startswith(
        "[1] kbdocs/guide.md:20-20 § Guide > Usage > Advanced"
    )
    assert rag_cli("delete", "kbdocs/notes.txt", "--kb", "proj") == 0
    assert capsys.readouterr().out.strip() == "1 file removed"
    assert rag_cli("list", "--kb", "proj") == 0
    assert capsys.readouterr().out.splitlines() == [
        "kbdocs/guide.md  (4 passages)",
        "kbdocs/src/helpers.py  (3 passages)",
    ]
    assert rag_cli("search", "x", "--kb", "proj", "--mode", "dense") == 2
    assert "the knowledge base has no vectors; ingest with --embed-url" in capsys.readouterr().err


async def test_validate_checks_the_knowledge_section(tmp_path: Path) -> None:
    config = write(
        tmp_path / "agent.yml",
        "model: openai:m\nknowledge: {sources: [missing-docs], path: kb/a.db}\n",
    )
    findings = [str(f) for f in await check_config(load_agent_config(config), environ={})]
    assert any("knowledge source" in f and "missing-docs does not exist" in f for f in findings)
    assert any("knowledge base" in f and "kb/a.db" in f for f in findings)


async def test_an_embedder_given_later_backfills_the_vectors(
    corpus: Path, tmp_path: Path, mock_server: MockLLMServer
) -> None:
    db = tmp_path / "later.db"
    async with KnowledgeBase(db) as kb:
        plain = await kb.ingest(corpus)
    embedder = OpenAIEmbeddings("hash-64", mock_server.url)
    async with embedder, KnowledgeBase(db, embedder=embedder) as kb:
        both = await asyncio.gather(kb.ingest(corpus), kb.ingest(corpus))  # one at a time
        assert sorted(r.embedded for r in both) == [0, plain.chunks_added]
        assert all(r.unchanged == 3 for r in both)
        hits = await kb.search("flux capacitor", k=1, mode="dense")
        assert hits[0].heading == "Guide > Usage > Advanced"


async def test_rag_commands_remember_the_embeddings_endpoint(
    corpus: Path, tmp_path: Path, mock_server: MockLLMServer
) -> None:
    async def rag(*args: str | Path) -> str:
        done = await anyio.run_process(
            [sys.executable, "-m", "simplellmfunc", "rag", *map(str, args)],
            cwd=tmp_path,
            check=False,
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        return done.stdout.decode()

    with anyio.fail_after(60):
        out = await rag(
            "ingest", corpus, "--kb", "dense", "--embed-url", mock_server.url, "--embed-model", "m"
        )
        assert "3 added" in out
        assert "embedded" in out
        hits = json.loads(
            await rag(
                "search", "flux capacitor", "--kb", "dense", "--mode", "dense", "--format", "json"
            )
        )
    assert hits[0]["heading"] == "Guide > Usage > Advanced"
    assert any(
        r.path == "/v1/embeddings" and r.json["input"] == ["flux capacitor"]
        for r in mock_server.requests
    )


@pytest.mark.skipif(
    hasattr(sqlite3.Connection, "enable_load_extension"), reason="this sqlite3 loads extensions"
)
async def test_a_shared_database_that_cannot_load_sqlite_vec_is_refused() -> None:
    database = SQLiteDatabase(":memory:")
    embedder = OpenAIEmbeddings("m", "http://127.0.0.1:9/v1")
    try:
        with pytest.raises(ConfigError, match="cannot load extensions"):
            KnowledgeBase(database, embedder=embedder)
        async with KnowledgeBase(database) as kb:  # BM25 on it is fine
            await kb.add_text("note", "shared databases work for BM25")
            assert [p.source for p in await kb.search("shared")] == ["note"]
    finally:
        database.close()
        await embedder.aclose()


async def test_an_unset_embeddings_key_variable_is_a_config_error(tmp_path: Path) -> None:
    config = write(
        tmp_path / "agent.yml",
        "model: openai:m\nknowledge:\n  embeddings: {model: e, base_url: 'http://127.0.0.1:9/v1',"
        " api_key_env: NO_SUCH_EMBEDDINGS_KEY}\n",
    )
    env = {"OPENAI_API_KEY": "sk-test-123456789"}
    with pytest.raises(
        ConfigError, match=r"knowledge\.embeddings\.api_key_env: the variable NO_SUCH"
    ):
        await run_config(config, "hi", environ=env)
