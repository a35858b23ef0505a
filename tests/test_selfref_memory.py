"""SelfReference memory: the handle API, validation, stores, persistence and crash safety."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from simplellmfunc.builtin import SelfReference
from simplellmfunc.builtin.selfref import KeyState, MemoryStateStore, SQLiteStateStore
from simplellmfunc.exceptions import InvalidHistoryError, UserError

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.fixture(params=["memory", "sqlite"])
def sr(request: pytest.FixtureRequest, tmp_path: Path) -> SelfReference:
    ref = SelfReference(tmp_path / "m.db") if request.param == "sqlite" else SelfReference()
    yield ref
    ref.close()


def test_handle_operations(sr: SelfReference) -> None:
    with pytest.raises(KeyError, match="is not bound"):  # SimpleLLMFunc's behaviour
        sr.memory["agent_main"]
    sr.bind_history("agent_main", [])
    mem = sr.memory["agent_main"]
    assert mem.count() == 0
    assert mem.all() == []
    assert mem.get_system_prompt() is None
    mem.append({"role": "user", "content": "remember this"})
    mem.insert(0, {"role": "system", "content": "You are helpful."})
    mem.insert(1, {"role": "assistant", "content": "inserted"})
    mem.update(1, {"role": "assistant", "content": "updated"})
    assert [m["content"] for m in mem.all()] == ["You are helpful.", "updated", "remember this"]
    assert mem.get(-1) == {"role": "user", "content": "remember this"}
    mem.delete(1)
    assert mem.count() == 2
    mem.append_system_prompt("User preference: answer in concise bullet points.")
    mem.append_system_prompt("Always include one actionable next step.")
    assert mem.get_system_prompt() == (
        "You are helpful.\nUser preference: answer in concise bullet points.\n"
        "Always include one actionable next step."
    )
    mem.set_system_prompt("You are a concise coding assistant.")
    assert mem.get(0) == {"role": "system", "content": "You are a concise coding assistant."}
    mem.replace([{"role": "system", "content": "S"}, {"role": "user", "content": "hello"}])
    assert mem.count() == 2
    assert sr.get_history("agent_main") == mem.all()
    mem.clear()  # keeps the system prompt, as SimpleLLMFunc's
    assert mem.all() == [{"role": "system", "content": "S"}]
    mem.replace([])
    assert mem.count() == 0
    mem.set_system_prompt("fresh")
    assert mem.all() == [{"role": "system", "content": "fresh"}]


def test_reads_are_deep_copies(sr: SelfReference) -> None:
    sr.bind_history("k", [])
    mem = sr.memory["k"]
    mem.append({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    snapshot = mem.all()
    snapshot[0]["content"][0]["text"] = "changed"
    one = mem.get(0)
    one["content"].append({"type": "text", "text": "x"})
    assert mem.get(0) == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    source = {"role": "user", "content": [{"type": "text", "text": "a"}]}
    mem.append(source)
    source["content"][0]["text"] = "mutated after append"
    assert mem.get(1)["content"][0]["text"] == "a"


@pytest.mark.parametrize(
    ("message", "fragment"),
    [
        ({"role": "wizard", "content": "x"}, "unknown role"),
        ({"role": "user", "content": 42}, "content"),
        ({"role": "tool", "tool_call_id": "nope", "content": "x"}, "unknown call"),
        ({"role": "assistant", "content": None, "tool_calls": [CALL]}, "has no result"),
        ({"role": "system", "content": "late"}, "only allowed first"),
        ("not a dict", "must be a dict"),
    ],
)
def test_invalid_writes_change_nothing(sr: SelfReference, message: object, fragment: str) -> None:
    sr.bind_history("k", [])
    mem = sr.memory["k"]
    mem.append({"role": "user", "content": "ok"})
    with pytest.raises(InvalidHistoryError, match=fragment):
        mem.append(message)  # type: ignore[arg-type]
    assert mem.all() == [{"role": "user", "content": "ok"}]


def test_tool_linkage_and_index_errors(sr: SelfReference) -> None:
    sr.bind_history("k", [])
    mem = sr.memory["k"]
    mem.replace(
        [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"},
        ]
    )
    with pytest.raises(InvalidHistoryError, match="unknown call"):
        mem.delete(1)  # would orphan the tool result
    with pytest.raises(InvalidHistoryError, match="out of range"):
        mem.get(3)
    with pytest.raises(InvalidHistoryError, match="must be an int"):
        mem.update("0", {"role": "user", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(InvalidHistoryError):
        sr.bind_history("k", [{"role": "tool", "tool_call_id": "zz", "content": ""}])
    assert mem.count() == 3


def test_keys_are_isolated(sr: SelfReference) -> None:
    sr.bind_history("agent_1", [{"role": "user", "content": "one"}])
    sr.bind_history("agent_2", [])
    sr.memory["agent_2"].append({"role": "user", "content": "two"})
    assert sr.remember("agent_1", "fact one") == {"id": "exp_1", "text": "fact one"}
    assert sr.remember("agent_2", "fact two")["id"] == "exp_1"
    assert sr.get_history("agent_1") == [{"role": "user", "content": "one"}]
    assert sr.get_history("agent_2") == [{"role": "user", "content": "two"}]
    assert sr.get_experiences("agent_1") == [{"id": "exp_1", "text": "fact one"}]
    assert sr.keys() == ["agent_1", "agent_2"]


def test_experience_ids_never_repeat(sr: SelfReference) -> None:
    assert sr.remember("k", "a")["id"] == "exp_1"
    assert sr.remember("k", "b")["id"] == "exp_2"
    assert sr.forget("k", "exp_2") is True
    assert sr.forget("k", "exp_2") is False
    assert sr.remember("k", "c")["id"] == "exp_3"
    sr.bind_history("k", [{"role": "user", "content": "rebound"}])
    assert sr.remember("k", "d")["id"] == "exp_4"
    with pytest.raises(InvalidHistoryError):
        sr.remember("k", "  ")


def test_compact_keeps_system_prompt(sr: SelfReference) -> None:
    sr.bind_history(
        "k",
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
        ],
    )
    out = sr.compact(
        "k",
        goal="Fix the bug",
        instruction="Be brief",
        discoveries=["the parser drops tabs"],
        completed=["reproduced"],
        current_status="patch drafted",
        likely_next_work="run tests",
        relevant_files_directories=["src/parser.py"],
        remember=["tests live in tests/"],
    )
    history = sr.get_history("k")
    assert history[0] == {"role": "system", "content": "S"}
    assert history[1] == out["assistant_message"]
    assert len(history) == 2
    assert "## Goal\nFix the bug" in out["assistant_message"]["content"]
    assert "- src/parser.py" in out["assistant_message"]["content"]
    assert out["remembered"] == [{"id": "exp_1", "text": "tests live in tests/"}]
    assert out["replaced_messages"] == 2
    assert sr.get_summaries("k")[0]["goal"] == "Fix the bug"
    with pytest.raises(InvalidHistoryError, match="unknown fields"):
        sr.compact("k", goal="g", bogus=1)
    info = sr.inspect("k")
    assert info["message_count"] == 2
    assert info["summary_count"] == 1
    assert info["system_prompt"] == "S"


def test_active_key_needs_a_turn() -> None:
    sr = SelfReference()
    with pytest.raises(UserError):
        sr.active_key()
    assert sr.active_key("x") == "x"


def test_sqlite_persists_across_instances(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    first = SelfReference(path)
    first.bind_history("a", [])
    first.bind_history("b", [])
    first.memory["a"].replace(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "u"}]
    )
    first.remember("a", "durable")
    first.memory["b"].append({"role": "user", "content": "other"})
    first.close()
    second = SelfReference(path=path)
    assert second.get_history("a") == [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "u"},
    ]
    assert second.get_experiences("a") == [{"id": "exp_1", "text": "durable"}]
    assert second.remember("a", "next")["id"] == "exp_2"
    assert second.keys() == ["a", "b"]
    second.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def test_stores_round_trip_state(tmp_path: Path) -> None:
    state = KeyState(({"role": "user", "content": "é"},), ({"id": "exp_1", "text": "t"},), 2)
    for store in (MemoryStateStore(), SQLiteStateStore(tmp_path / "s.db")):
        store.save("k", state)
        assert store.load("k") == state
        assert store.load("missing") == KeyState()
        store.close()


_WRITER = """
import sys
from simplellmfunc.builtin import SelfReference
sr = SelfReference(sys.argv[1])
sr.bind_history("loop", [])
mem = sr.memory["loop"]
n = 0
while True:
    n += 1
    mem.append({"role": "user", "content": "message %d " % n + "x" * 2000})
    if n == 20:
        print("ready", flush=True)
"""


def test_kill_during_writes_leaves_last_committed_state(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.2)  # let it keep writing, so the kill lands mid-loop
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    sr = SelfReference(path)
    try:
        history = sr.get_history("loop")
        assert len(history) >= 20
        # Committed states are whole: messages 1..n in order, none torn.
        assert [m["content"].split()[1] for m in history] == [
            str(i) for i in range(1, len(history) + 1)
        ]
        sr.memory["loop"].append({"role": "user", "content": "after crash"})
        assert sr.memory["loop"].count() == len(history) + 1
    finally:
        sr.close()
