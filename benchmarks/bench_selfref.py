"""SelfReference store: memory operations per second and the time to persist a long history.

Floor: raw ``sqlite3`` with the same durability settings (WAL, synchronous=FULL, one
transaction per write) inserting one row per operation, measured in the same run.

Run: ``python benchmarks/bench_selfref.py``.
"""

from __future__ import annotations

import sqlite3
import tempfile
import time
from pathlib import Path

from _common import print_table

from simplellmfunc.builtin import SelfReference

OPS = 300
HISTORY = 2000


def message(n: int) -> dict[str, str]:
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": f"message {n}: " + "lorem ipsum " * 8}


def raw_sqlite_appends(path: Path, count: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE m (k TEXT, n INTEGER, body TEXT)")
    started = time.perf_counter()
    for n in range(count):
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO m VALUES ('k', ?, ?)", (n, repr(message(n))))
        db.execute("COMMIT")
    elapsed = time.perf_counter() - started
    db.close()
    return elapsed


def selfref_appends(path: Path | None, count: int) -> float:
    memory = SelfReference(path=path) if path is not None else SelfReference()
    memory.bind_history("bench", [{"role": "system", "content": "You are a benchmark."}])
    handle = memory.memory["bench"]  # a key is bound before its handle is used
    started = time.perf_counter()
    for n in range(count):
        handle.append(message(n))
    elapsed = time.perf_counter() - started
    memory.close()
    return elapsed


def persist_history(path: Path, size: int) -> float:
    memory = SelfReference(path=path)
    history = [{"role": "system", "content": "You are a benchmark."}]
    history += [message(n) for n in range(size)]
    started = time.perf_counter()
    memory.bind_history("long", history)
    elapsed = time.perf_counter() - started
    memory.close()
    reopened = SelfReference(path=path)
    assert len(reopened.get_history("long")) == size + 1
    reopened.close()
    return elapsed


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        floor = raw_sqlite_appends(root / "raw.db", OPS)
        sqlite = selfref_appends(root / "sr.db", OPS)
        in_memory = selfref_appends(None, OPS)
        persist = persist_history(root / "long.db", HISTORY)
    rows = [
        ["raw sqlite insert (floor)", f"{OPS / floor:,.0f}", "1.00x"],
        ["SelfReference(path=...) append", f"{OPS / sqlite:,.0f}", f"{sqlite / floor:.2f}x"],
        ["SelfReference() append (memory)", f"{OPS / in_memory:,.0f}", f"{in_memory / floor:.2f}x"],
    ]
    print(f"{OPS} appends to a growing history, each a durable transaction")
    print_table(["store", "ops/s", "time vs floor"], rows)
    print(f"\npersist a {HISTORY}-message history (bind_history, SQLite): {persist * 1000:.1f} ms")


if __name__ == "__main__":
    main()
