"""Files the runtime opens by path get their folders created (a fresh checkout just works)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simplellmfunc.exceptions import ConfigError, RunError
from simplellmfunc.runtime import Checkpoint, CheckpointManager, open_store
from simplellmfunc.runtime.trace import JSONLSink, SQLiteTraceSink, TraceRecord, read_jsonl


def a_record() -> TraceRecord:
    return TraceRecord(step=0, kind="end", name="answer", started=0.0, duration_ms=1.0)


async def test_a_sqlite_store_creates_its_folder(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "memory.db"
    store = await open_store("sqlite", path=path)
    try:
        scoped = store.scope("agent", "s")
        await scoped.set("k", "v")
        item = await scoped.get("k")
        assert item is not None
        assert item.value == "v"
    finally:
        await store.aclose()
    assert path.is_file()


async def test_trace_sinks_create_their_folders(tmp_path: Path) -> None:
    database = SQLiteTraceSink(tmp_path / "traces" / "db" / "t.db")
    await database.write(a_record(), "t1")
    await database.aclose()
    assert (tmp_path / "traces" / "db" / "t.db").is_file()
    lines = JSONLSink(tmp_path / "traces" / "jsonl" / "t.jsonl")
    await lines.write(a_record(), "t1")
    await lines.aclose()
    assert [r.kind for r in await read_jsonl(tmp_path / "traces" / "jsonl" / "t.jsonl")] == ["end"]


async def test_a_file_in_the_way_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file, not a folder")
    with pytest.raises(ConfigError, match="cannot create the folder"):
        await open_store("sqlite", path=tmp_path / "blocker" / "memory.db")
    sink = JSONLSink(tmp_path / "blocker" / "t.jsonl")
    with pytest.raises(RunError, match="cannot write trace file"):
        await sink.write(a_record(), "t1")
    await sink.aclose()


async def test_in_memory_sqlite_needs_no_folder(tmp_path: Path) -> None:
    store = await open_store("sqlite", path=":memory:")
    await store.aclose()


async def test_checkpoints_create_their_folder(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "a" / "b")
    info = await manager.save(Checkpoint(history=({"role": "user", "content": "hi"},)))
    assert info.number == 1
    assert (tmp_path / "a" / "b").is_dir()


def test_selfreference_makes_its_database_folder_too(tmp_path: Path) -> None:
    from simplellmfunc import SelfReference

    path = tmp_path / "memory" / "agents" / "m.db"
    memory = SelfReference(path=path)
    memory.bind_history("agent", [])
    memory.memory["agent"].append({"role": "user", "content": "hi"})
    memory.close()
    assert path.exists()
