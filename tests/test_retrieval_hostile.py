"""Retrieval against hostile folders and the seed's §22 defects.

The hostile ingest runs in a child process with a memory cap and a deadline: the code before
this change blocked forever on the FIFO and read ``/dev/zero`` until memory ran out, which a
test must report as a failure, not suffer. The child reports what was skipped and its peak RSS.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from simplellmfunc.exceptions import ConfigError, UserError
from simplellmfunc.runtime.retrieval import KnowledgeBase, chunk_text, create_rag, retrieve_tool
from test_retrieval import minimal_pdf, write

ZH = json.loads((Path(__file__).parent / "data" / "rag_zh.json").read_text("utf-8"))

CHILD = r"""
import json, resource, sys
import anyio
from simplellmfunc.runtime.retrieval import KnowledgeBase

def status_kb(key):  # VmHWM: this process's peak (ru_maxrss would count the parent's too)
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])

async def main():
    async with KnowledgeBase() as kb:
        await kb.count()
        before = status_kb("VmRSS")
        report = await kb.ingest(sys.argv[1])
        peak = status_kb("VmHWM")
        hits = [p.source for p in await kb.search("SECRET KEY MATERIAL", 10)]
        sources = [s.source for s in await kb.sources()]
    print(json.dumps({
        "skipped": [[s.source, s.reason] for s in report.skipped],
        "sources": sources, "hits": hits, "before_kb": before, "peak_kb": peak,
    }))

resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
anyio.run(main)
"""


def flate_pdf(raw_size: int) -> bytes:
    """A PDF whose one content stream inflates to ``raw_size`` bytes (a "PDF bomb")."""
    plain = minimal_pdf("PLACEHOLDER")
    bomb = zlib.compress(b" " * raw_size, 9)
    old = plain[plain.index(b"4 0 obj") : plain.index(b"endobj", plain.index(b"4 0 obj"))]
    new = b"4 0 obj\n<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream\n" % (
        len(bomb),
        bomb,
    )
    return plain.replace(old, new)  # the xref offsets go stale: pypdf repairs them


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    outside = tmp_path / "home"
    write(outside / ".ssh" / "id_rsa", "SECRET KEY MATERIAL\n")
    write(outside / "project" / "notes.md", "SECRET KEY MATERIAL in a linked folder\n")
    root = tmp_path / "docs"
    write(root / "readme.md", "# Readme\n\nThe only file worth reading.\n")
    (root / "notes").symlink_to(outside / ".ssh" / "id_rsa")  # no suffix: a text candidate
    (root / "linked").symlink_to(outside / "project", target_is_directory=True)
    (root / "zero.txt").symlink_to("/dev/zero")
    os.mkfifo(root / "pipe.txt")
    with (root / "big.txt").open("wb") as big:
        big.truncate(50_000_000)  # 50 MB (sparse: the size is what counts)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock.txt"))
    server.close()  # the socket file stays
    (root / "bomb.pdf").write_bytes(flate_pdf(60_000_000))
    return root


def test_ingestion_treats_every_file_as_hostile(hostile: Path) -> None:
    pytest.importorskip("pypdf")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(hostile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    skipped = dict(result["skipped"])
    assert skipped == {
        "docs/big.txt": "larger than 5,000,000 bytes",
        "docs/bomb.pdf": skipped["docs/bomb.pdf"],
        "docs/linked": "symlinked folder (not followed)",
        "docs/notes": "symlink (not followed)",
        "docs/pipe.txt": "not a regular file (fifo)",
        "docs/sock.txt": "not a regular file (socket)",
        "docs/zero.txt": "symlink (not followed)",
    }
    assert skipped["docs/bomb.pdf"].startswith("the PDF cannot be read")
    assert result["sources"] == ["docs/readme.md"]
    assert result["hits"] == []  # the key behind the link is not searchable
    peak_mb = (result["peak_kb"] - result["before_kb"]) / 1024
    print(f"hostile ingest: peak RSS {peak_mb:.1f} MB above the start")
    assert peak_mb < 48  # 37 MB measured: pypdf inflating the bomb up to its 10 MB cap


async def test_a_file_swapped_for_a_fifo_after_the_walk_is_skipped(tmp_path: Path) -> None:
    # The walk saw a regular file; the read must open that one, without blocking.
    root = tmp_path / "docs"
    write(root / "a.md", "alpha\n")
    async with KnowledgeBase() as kb:
        from simplellmfunc.runtime.retrieval._files import read_chunks, walk

        (entry,) = list(walk(root))
        (root / "a.md").unlink()
        os.mkfifo(root / "a.md")
        assert str(read_chunks(entry, 1500)) == "docs/a.md: not a regular file (fifo)"
        report = await kb.ingest(root)
        # A folder swapped for a link to the outside after the walk: the read stays inside.
        write(root / "sub" / "b.md", "bravo\n")
        write(tmp_path / "outside" / "b.md", "SECRET\n")
        (entry,) = [e for e in walk(root) if e.source == "docs/sub/b.md"]
        (root / "sub" / "b.md").unlink()
        (root / "sub").rmdir()
        (root / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
        assert str(read_chunks(entry, 1500)) == "docs/sub/b.md: symlink (not followed)"
    assert [str(s) for s in report.skipped] == ["docs/a.md: not a regular file (fifo)"]
    assert str(report).endswith("\n  skipped docs/a.md: not a regular file (fifo)")


def test_a_single_long_line_is_cut_to_max_chunk_chars() -> None:
    line = "word " * 980_000  # 4.9 MB on one line
    chunks = chunk_text(line, "one-line.txt", "text", max_chars=1500)
    assert max(len(c.text) for c in chunks) <= 1500
    assert len(chunks) > 3000
    assert {(c.start_line, c.end_line) for c in chunks} == {(1, 1)}
    assert "".join(c.text + " " for c in chunks).split() == line.split()
    minified = "x" * 10_000 + "\nnext line\n"  # no space to cut at
    pieces = chunk_text(minified, "min.js", "code", max_chars=1000)
    assert [len(c.text) for c in pieces][:3] == [999, 999, 999]
    assert pieces[-1].text.endswith("next line")
    assert pieces[-1].end_line == 2


async def test_chinese_text_is_searchable(tmp_path: Path) -> None:
    async with KnowledgeBase(tmp_path / "zh.db") as kb:
        for source, text in ZH["documents"].items():
            await kb.add_text(source, text)
        found = 0
        for question, expected in ZH["questions"]:
            found += expected in [p.source for p in await kb.search(question, 5)]
        first = await kb.search("丘奇", 1)
    recall = found / len(ZH["questions"])
    print(f"Chinese recall@5: {recall:.2f} ({found}/{len(ZH['questions'])})")
    assert recall >= 0.9
    assert first[0].source == "lambda.md"


async def test_two_folders_of_one_name_are_cited_apart_and_deleted_apart(tmp_path: Path) -> None:
    write(tmp_path / "a" / "docs" / "x.md", "alpha apples\n")
    write(tmp_path / "b" / "docs" / "x.md", "beta bananas\n")
    async with KnowledgeBase(tmp_path / "kb.db") as kb:
        await kb.ingest(tmp_path / "a" / "docs")
        await kb.ingest(tmp_path / "b" / "docs")
        await kb.ingest(tmp_path / "a" / "docs")  # again: it keeps its citations
        sources = [s.source for s in await kb.sources()]
        assert sources == ["b/docs/x.md", "docs/x.md"]
        assert (await kb.search("bananas", 1))[0].citation == "b/docs/x.md:1-1"
        assert await kb.delete("docs/x.md") == 1
        assert [s.source for s in await kb.sources()] == ["b/docs/x.md"]


async def test_a_lone_surrogate_in_add_text_is_replaced() -> None:
    async with KnowledgeBase() as kb:
        report = await kb.add_text("bad\udcffname", "broken \ud800 surrogate text")
        (hit,) = await kb.search("surrogate", 1)
    assert report.added == 1
    assert hit.text == "broken \ufffd surrogate text"
    assert hit.source == "bad\ufffdname"


async def test_the_seeds_spellings_and_output_formats() -> None:
    docs = ["Lambda calculus was invented by Church", "Turing machines", "Photosynthesis"]
    async with create_rag(docs, top_k=2, backend="simple") as rag:
        assert rag.k == 2
        assert (await rag.search("lambda calculus"))[0].text == docs[0]
        with pytest.raises(UserError):
            await rag.search("lambda", k=0)
        with pytest.raises(UserError):
            await rag.kb.search("lambda", k=0)
        await rag.add("Quicksort partitions around a pivot")
        await rag.add_many({"tea.md": "Green tea is not fermented"})
        assert (await rag.search("pivot"))[0].source.startswith("doc-")
        assert (await rag.search("fermented"))[0].source == "tea.md"
        plain = retrieve_tool(rag.kb, output="plain")
        as_json = retrieve_tool(rag.kb, output="json")
        assert await plain.invoke({"query": "Church"}) == docs[0]
        (item,) = json.loads(await as_json.invoke({"query": "Church", "k": 1}))
        assert (item["n"], item["text"], item["source"]) == (1, docs[0], "doc-1")
        assert json.loads(await as_json.invoke({"query": "zebra"})) == []
        assert (await rag.tool.invoke({"query": "Church"})).startswith("[1] doc-1:1-1")
    with pytest.raises(ConfigError, match="embedder="):
        create_rag(docs, backend="chroma")
    with pytest.raises(UserError):
        retrieve_tool(rag.kb, output="xml")  # type: ignore[arg-type]
