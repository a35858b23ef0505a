"""Retrieval: ingestion throughput and query latency against a raw SQLite FTS5 floor, and
recall@5 on labelled questions over the Python standard library's own source and docstrings,
and beside it on a small labelled Chinese set (``tests/data/rag_zh.json``).

The corpus is a copy of the stdlib modules below (the running Python's, so every machine has
it), ingested into a fresh knowledge base file. The floor is the same chunks, every column the
knowledge base returns, inserted into a plain FTS5 table (same tokenizer, same BM25 column
weights, one transaction) and the same ``MATCH`` query run on it with ``conn.execute`` directly,
in the same SQLite library, fetching the same five rows (checked: same passages, same order).
Ingestion is measured in ``--rounds`` rounds (3 by default), each a fresh knowledge base
ingesting the corpus and right after it the floor inserting its chunks; the medians and the
median of the rounds' ratios (passages per second, ours to the floor's) are printed. Targets:
ingestion ≥ 0.8× the floor, query latency ≤ 1.2× the floor (median). Recall@5 (is a passage
of the expected module among the first five?) is reported, not asserted: it describes BM25 on
this corpus, not a regression line.

Run: ``python benchmarks/bench_rag.py`` (add ``--hybrid`` for hybrid search with the mock
server's hashed bag-of-words vectors: latency only, those vectors are not a model; add
``--parts`` for ingestion's parts timed alone, and the least time they allow: see
:func:`breakdown`).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import random
import shutil
import statistics
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import fmt, print_table, summarize

from simplellmfunc.providers import OpenAIEmbeddings
from simplellmfunc.runtime.retrieval import KnowledgeBase
from simplellmfunc.runtime.retrieval._files import FileEntry, Skipped, read_chunks, walk
from simplellmfunc.runtime.retrieval._index import (  # the MATCH the floor runs too; the parts
    PAGE_SIZE,
    SCHEMA,
    fts_query,
    insert_chunks,
    register_functions,
)
from simplellmfunc.runtime.retrieval._plan import EMIT_BATCH
from simplellmfunc.testing import MockLLMServer

STDLIB = Path(sysconfig.get_paths()["stdlib"])
PACKAGES = ("json", "asyncio", "concurrent", "email", "http", "urllib", "logging", "collections")
QUERY_ROUNDS = 20
TARGET = 1.2
INGEST_TARGET = 0.8

# Question → the module whose passages answer it (path under the corpus folder).
QUESTIONS: list[tuple[str, str]] = [
    ("How do I serialize a Python object to a JSON formatted string?", "json/__init__.py"),
    ("read rows from a comma separated values file", "csv.py"),
    ("shuffle a list in place randomly", "random.py"),
    ("rational numbers with a numerator and a denominator", "fractions.py"),
    ("copy a file together with its permission bits", "shutil.py"),
    ("match a filename against a shell-style wildcard pattern", "fnmatch.py"),
    ("encode binary data as base64 text", "base64.py"),
    ("tuple subclass with named fields accessible by attribute", "collections/__init__.py"),
    ("deep copy of a compound object with recursive references", "copy.py"),
    ("read an INI configuration file with sections", "configparser.py"),
    ("temporary directory removed automatically when done", "tempfile.py"),
    ("parse command line options and positional arguments", "argparse.py"),
    ("priority queue implemented as a binary heap", "heapq.py"),
    ("insert into a sorted list keeping it sorted, binary search", "bisect.py"),
    ("wrap a paragraph of text to a given line width", "textwrap.py"),
    ("send an email message through an SMTP server", "smtplib.py"),
    ("split a URL into scheme, network location and path", "urllib/parse.py"),
    ("compare two sequences of lines and produce a unified diff", "difflib.py"),
    ("wait for a coroutine with a timeout and cancel it", "asyncio/tasks.py"),
    ("pretty print nested data structures", "pprint.py"),
    ("run callables asynchronously in a pool of threads", "concurrent/futures/thread.py"),
    ("log handler that rotates the log file when it gets too big", "logging/handlers.py"),
    ("arithmetic mean and standard deviation of a sample", "statistics.py"),
    ("generate universally unique identifiers", "uuid.py"),
    ("HTTP client connection sending requests to a server", "http/client.py"),
]


def build_corpus(target: Path) -> tuple[int, int]:
    """Copy the stdlib modules into ``target``; (files, bytes)."""
    files = [p for p in STDLIB.glob("*.py") if not p.name.startswith("_")]
    for package in PACKAGES:
        files += [p for p in (STDLIB / package).rglob("*.py") if "test" not in p.parts]
    size = 0
    for path in files:
        out = target / path.relative_to(STDLIB)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out)
        size += path.stat().st_size
    return len(files), size


def driver_of(kb: KnowledgeBase) -> Any:
    """The DB-API module the knowledge base runs on (the floor must use the same SQLite)."""
    name = kb.database.read(lambda conn: type(conn).__module__)
    return importlib.import_module(name)


FLOOR_COLUMNS = "id, source, heading, start_line, end_line, text"
FLOOR_SQL = f"SELECT {FLOOR_COLUMNS}, rank FROM f WHERE f MATCH ? ORDER BY rank LIMIT 5"


def build_floor(kb: KnowledgeBase, path: Path) -> tuple[Any, float, float]:
    """A plain FTS5 table of the knowledge base's chunks; (connection, seconds to insert, CPU
    seconds to insert)."""
    rows = kb.database.read(lambda c: list(c.execute(f"SELECT {FLOOR_COLUMNS} FROM chunks")))
    conn = driver_of(kb).connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE VIRTUAL TABLE f USING fts5(id UNINDEXED, source UNINDEXED, heading, "
        "start_line UNINDEXED, end_line UNINDEXED, text, tokenize='porter unicode61')"
    )
    # The knowledge base's ranking: the heading weighs twice the text.
    conn.execute("INSERT INTO f (f, rank) VALUES ('rank', 'bm25(0, 0, 2.0, 0, 0, 1.0)')")
    started, cpu = time.perf_counter(), time.process_time()
    conn.execute("BEGIN")
    conn.executemany(f"INSERT INTO f ({FLOOR_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()  # queried on a fresh connection, like the knowledge bases
    return driver_of(kb).connect(str(path), isolation_level=None), seconds, cpu


async def check_floor(kb: KnowledgeBase, floor: Any) -> None:
    """The floor must do the same work: the same passages, in the same order."""
    for question, _ in QUESTIONS:
        ours = [p.id for p in await kb.search(question, 5)]
        raw = [row[0] for row in floor.execute(FLOOR_SQL, (fts_match(question),))]
        if ours != raw:
            raise SystemExit(f"the floor differs for {question!r}: {raw} != {ours}")


def fts_match(question: str) -> str:
    """The MATCH expression the knowledge base builds for ``question``."""
    return fts_query(question)


async def measure_queries(
    kbs: dict[str, KnowledgeBase], floor: Any
) -> tuple[list[float], dict[str, list[float]], list[float]]:
    """Latencies of the raw floor query, of ``await kb.search`` for each knowledge base, and of
    a thread hop alone."""
    raw: list[float] = []
    hops: list[float] = []
    ours: dict[str, list[float]] = {name: [] for name in kbs}

    async def floor_async(question: str) -> None:
        floor.execute(FLOOR_SQL, (fts_match(question),)).fetchall()

    async def hop(question: str) -> None:
        await anyio.to_thread.run_sync(lambda: None)

    def searcher(kb: KnowledgeBase) -> Any:
        async def run(question: str) -> None:
            await kb.search(question, 5)

        return run

    steps = [(raw, floor_async), (hops, hop)]
    steps += [(ours[name], searcher(kb)) for name, kb in kbs.items()]
    for _, run in steps:  # warm every cache
        for question, _ in QUESTIONS:
            await run(question)
    # A shuffled order per question: no way runs always right after a thread switch (the
    # loop's thread, just woken, is less likely to be preempted on a loaded machine).
    order = random.Random(0)
    for _ in range(QUERY_ROUNDS):
        for question, _ in QUESTIONS:
            for target, run in order.sample(steps, len(steps)):
                started = time.perf_counter()
                await run(question)
                target.append(time.perf_counter() - started)
    return raw, ours, hops


async def measure_cpu(kbs: dict[str, KnowledgeBase], floor: Any) -> dict[str, float]:
    """Process CPU time per query (every thread's), each way in a loop of its own: what a
    query costs when the machine's other load is taken out."""

    async def floor_async(question: str) -> None:
        floor.execute(FLOOR_SQL, (fts_match(question),)).fetchall()

    runs: dict[str, Any] = {"floor": floor_async}
    for name, kb in kbs.items():
        runs[name] = functools.partial(lambda kb, q: kb.search(q, 5), kb)
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(3):
        for name, run in runs.items():
            started = time.process_time()
            for _ in range(4):
                for question, _ in QUESTIONS:
                    await run(question)
            cpu[name].append((time.process_time() - started) / (4 * len(QUESTIONS)))
    return {name: statistics.median(values) for name, values in cpu.items()}


async def recall_at_5(kb: KnowledgeBase, mode: str | None = None) -> tuple[float, list[str]]:
    missed = []
    for question, expected in QUESTIONS:
        hits = await kb.search(question, 5, mode=mode)  # type: ignore[arg-type]
        if not any(h.source == f"corpus/{expected}" for h in hits):
            missed.append(f"{question!r} → {expected}")
    return 1 - len(missed) / len(QUESTIONS), missed


ZH_SET = Path(__file__).resolve().parents[1] / "tests" / "data" / "rag_zh.json"


async def chinese_recall_at_5() -> tuple[float, int]:
    """Recall@5 (BM25) on the labelled Chinese set: documents added as text, then asked."""
    labelled = json.loads(ZH_SET.read_text("utf-8"))
    async with KnowledgeBase() as kb:
        await kb.add_many(labelled["documents"])
        found = 0
        for question, expected in labelled["questions"]:
            found += expected in [p.source for p in await kb.search(question, 5)]
    return found / len(labelled["questions"]), len(labelled["questions"])


async def hybrid(corpus: Path, workdir: Path) -> list[list[Any]]:
    async with MockLLMServer() as server:
        embedder = OpenAIEmbeddings("hash-256", server.url, dimensions=256)
        async with embedder, KnowledgeBase(workdir / "hybrid.db", embedder=embedder) as kb:
            started = time.perf_counter()
            report = await kb.ingest(corpus)
            seconds = time.perf_counter() - started
            latencies = []
            for question, _ in QUESTIONS * 4:
                t = time.perf_counter()
                await kb.search(question, 5)
                latencies.append(time.perf_counter() - t)
            recall, _ = await recall_at_5(kb)
    stats = summarize(latencies)
    return [
        [
            "hybrid ingest (mock vectors over HTTP)",
            f"{report.chunks_added / seconds:,.0f} chunks/s",
            "",
        ],
        ["hybrid query p50 / p95", f"{fmt(stats.median * 1e3)} / {fmt(stats.p95 * 1e3)} ms", ""],
        ["hybrid recall@5 (hashed bag-of-words vectors)", f"{recall:.0%}", ""],
    ]


def ms(stats: Any) -> str:
    return f"{fmt(stats.median * 1e3, 3)} / {fmt(stats.p95 * 1e3, 3)} ms"


def per_s(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f} chunks/s"


async def ingest_rounds(corpus: Path, workdir: Path, rounds: int) -> dict[str, float]:
    """Ingestion against the floor, ``rounds`` times, each on fresh files; medians."""
    ours, floors, ratios, cpus, floor_cpus = [], [], [], [], []
    for n in range(rounds):
        async with KnowledgeBase(workdir / f"round{n}.db") as kb:
            cpu_started = time.process_time()
            report = await kb.ingest(corpus)
            cpus.append(time.process_time() - cpu_started)
            floor, seconds, cpu = build_floor(kb, workdir / f"round{n}-floor.db")
            floor.close()
        ours.append(report.chunks_added / report.seconds)
        floors.append(report.chunks_added / seconds)
        ratios.append(ours[-1] / floors[-1])
        floor_cpus.append(cpu)
    median = statistics.median
    return {
        "ours": median(ours),
        "floor": median(floors),
        "ratio": median(ratios),
        "cpu": median(cpus),
        "floor_cpu": median(floor_cpus),
        "spread": max(ratios) - min(ratios),
    }


def breakdown(kb: KnowledgeBase, corpus: Path, workdir: Path, rounds: int) -> list[list[Any]]:
    """Where ingestion's time goes, each part alone (medians of ``rounds``), and the least
    time the whole can take with the reader and the writer in two threads of one process.

    Parts: reading and chunking the files (Python: holds the GIL but for the reads and the
    hashing); the writer's statements with the chunks in hand, in the batches ``ingest`` uses:
    the rows (``chunks``) and the FTS5 index built from them (one statement per batch, run in
    SQLite without the GIL); the commit, and SQLite's automatic WAL checkpoint that the commit
    runs (copying the transaction's pages into the database file: timed apart here); the
    floor's insert, commit and checkpoint included. Chunking can run beside the index
    statements only: the rows' statements need the GIL between rows, and the commit comes
    after the last file is chunked. So the whole takes at least rows + max(chunking, index) +
    commit + checkpoint: the least time two threads of one process can take, had they no other
    work (the writer's own bookkeeping is left out) and lost no time waiting for each other."""
    entries = [e for e in walk(corpus, corpus.name) if isinstance(e, FileEntry)]
    driver = driver_of(kb)
    parts: dict[str, list[float]] = {
        k: [] for k in ("chunk", "rows", "index", "commit", "checkpoint", "floor")
    }
    for n in range(rounds):
        cpu = time.thread_time()
        chunked = [read_chunks(e, kb.max_chunk_chars) for e in entries]
        parts["chunk"].append(time.thread_time() - cpu)
        conn = driver.connect(str(workdir / f"parts{n}.db"), isolation_level=None)
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # the knowledge base's pages
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the checkpoint is run and timed below
        register_functions(conn)
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("BEGIN")
        rows = index = 0.0
        for start in range(0, len(entries), EMIT_BATCH):
            end = start + EMIT_BATCH
            batch = list(zip(entries[start:end], chunked[start:end], strict=True))
            new = [
                (e.path, c) for e, read in batch if not isinstance(read, Skipped) for c in read[1]
            ]
            # The knowledge base's own insert, its two halves timed apart at the seam it has
            # for the ingestion's reader: rows written, index not built yet.
            marks = [time.perf_counter()]
            insert_chunks(
                conn, new, before_index=lambda marks=marks: marks.append(time.perf_counter())
            )
            marks.append(time.perf_counter())
            rows += marks[1] - marks[0]
            index += marks[2] - marks[1]
        parts["rows"].append(rows)
        parts["index"].append(index)
        started = time.perf_counter()
        conn.execute("COMMIT")
        parts["commit"].append(time.perf_counter() - started)
        started = time.perf_counter()
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # what COMMIT runs when the WAL is long
        parts["checkpoint"].append(time.perf_counter() - started)
        conn.close()
        floor, seconds, _ = build_floor(kb, workdir / f"parts{n}-floor.db")
        floor.close()
        parts["floor"].append(seconds)
    m = {k: statistics.median(v) for k, v in parts.items()}
    # Both the reader and the rows need the GIL; the index statements run beside the reader;
    # the commit and its checkpoint come after the last file.
    least = m["rows"] + max(m["chunk"], m["index"]) + m["commit"] + m["checkpoint"]

    def out(seconds: float) -> str:
        return f"{seconds * 1e3:.0f} ms"

    return [
        ["parts alone: read and chunk (CPU, GIL held)", out(m["chunk"]), f"{len(entries)} files"],
        ["parts alone: writer's rows (built, inserted)", out(m["rows"]), "GIL held between rows"],
        ["parts alone: writer's index statements", out(m["index"]), "in SQLite, no GIL"],
        [
            "parts alone: commit / its WAL checkpoint",
            f"{out(m['commit'])} / {out(m['checkpoint'])}",
            "after the last file",
        ],
        ["parts alone: floor insert, commit included", out(m["floor"]), ""],
        [
            "least ingest time: rows + max(chunk, index) + commit, checkpoint",
            out(least),
            f"at best {m['floor'] / least:.2f}x floor",
        ],
    ]


async def main(with_hybrid: bool, rounds: int, parts: bool) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bench-rag-"))
    try:
        corpus = workdir / "corpus"
        files, size = build_corpus(corpus)
        ingestion = await ingest_rounds(corpus, workdir, rounds)
        async with KnowledgeBase(workdir / "kb.db") as kb:
            first = await kb.ingest(corpus)
            again = await kb.ingest(corpus)
            parts_rows = breakdown(kb, corpus, workdir, rounds) if parts else []
            floor, _, _ = build_floor(kb, workdir / "floor.db")
            try:
                await check_floor(kb, floor)
                async with (  # each way on a connection of its own, opened alike
                    KnowledgeBase(workdir / "kb.db") as default_kb,
                    KnowledgeBase(workdir / "kb.db", offload=False) as inline_kb,
                    KnowledgeBase(workdir / "kb.db", offload_after=0) as thread_kb,
                ):
                    kbs = {"default": default_kb, "inline": inline_kb, "thread": thread_kb}
                    raw, ours, hops = await measure_queries(kbs, floor)
                    cpu = await measure_cpu(kbs, floor)
            finally:
                floor.close()
            recall, missed = await recall_at_5(kb)
        zh_recall, zh_questions = await chinese_recall_at_5()
        chunks = first.chunks_added
        base, hop = summarize(raw), summarize(hops)
        mine, core, always = (summarize(ours[name]) for name in ("default", "inline", "thread"))
        ratio = mine.median / base.median
        mb = size / 1e6
        ingest_ratio = ingestion["ratio"]
        rows = [
            ["corpus", f"{files} stdlib files, {mb:.1f} MB, {chunks} chunks", ""],
            [
                f"ingest (read, chunk, index), median of {rounds}",
                f"{ingestion['ours']:,.0f} chunks/s",
                f"{mb * ingestion['ours'] / chunks:.1f} MB/s",
            ],
            [
                "floor: FTS5 insert of the same chunks",
                f"{ingestion['floor']:,.0f} chunks/s",
                "",
            ],
            [
                "ingest / floor (median of the rounds' ratios)",
                f"{ingest_ratio:.2f}x floor",
                f"target >= {INGEST_TARGET}x; rounds spread {ingestion['spread']:.2f}",
            ],
            [
                "ingest CPU: read, chunk, index / floor insert",
                f"{ingestion['cpu']:.2f} / {ingestion['floor_cpu']:.2f} s",
                f"{ingestion['cpu'] / ingestion['floor_cpu']:.1f}x floor",
            ],
            [
                "re-ingest, nothing changed",
                f"{again.seconds * 1e3:.0f} ms",
                f"{again.unchanged} unchanged",
            ],
            ["query p50 / p95: floor (raw FTS5)", ms(base), ""],
            [
                "query: KnowledgeBase(offload=False)",
                ms(core),
                f"{core.median / base.median:.2f}x floor",
            ],
            [
                "query: KnowledgeBase(offload_after=0), always in a thread",
                ms(always),
                f"{always.median / base.median:.2f}x floor",
            ],
            [
                "query: KnowledgeBase() (offload after 10 ms CPU, default)",
                ms(mine),
                f"{ratio:.2f}x floor (target <= {TARGET}x)",
            ],
            ["a thread hop alone, for comparison", ms(hop), ""],
            [
                "process CPU per query: floor / offload=False / thread / default",
                " / ".join(f"{cpu[n] * 1e3:.3f}" for n in ("floor", "inline", "thread", "default"))
                + " ms",
                f"default {cpu['default'] / cpu['floor']:.2f}x floor",
            ],
            ["recall@5 (BM25, labelled questions)", f"{recall:.0%} of {len(QUESTIONS)}", ""],
            [
                "recall@5 (BM25, labelled Chinese questions)",
                f"{zh_recall:.0%} of {zh_questions}",
                "",
            ],
        ]
        rows += parts_rows
        if with_hybrid:
            rows += await hybrid(corpus, workdir)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        title = f"retrieval (bench_rag; {os.cpu_count()} CPUs, load average {load})"
        print_table(["measure", "value", "note"], rows, title=title)
        for line in missed:
            print(f"  missed: {line}")
        return 0 if ratio <= TARGET and ingest_ratio >= INGEST_TARGET else 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hybrid", action="store_true", help="also measure hybrid search")
    parser.add_argument("--rounds", type=int, default=3, help="ingestion rounds (median)")
    parser.add_argument(
        "--parts", action="store_true", help="also time ingestion's parts alone (see breakdown)"
    )
    args = parser.parse_args()
    sys.exit(anyio.run(main, args.hybrid, args.rounds, args.parts))
