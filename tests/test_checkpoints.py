"""Checkpoints: numbering, rollback, pruning, version rules, capture/restore, resuming runs."""

from __future__ import annotations

import errno
import json
import os
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, SelfReference, llm_chat, tool
from simplellmfunc._events import EventOrigin
from simplellmfunc._transcript import Transcript
from simplellmfunc.engine import Emitter, Invocation, Run
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.runtime import (
    Checkpoint,
    CheckpointHook,
    CheckpointManager,
    InMemoryStore,
    TraceRecord,
    TraceRecorder,
    load_checkpoint,
    save_checkpoint,
    serialize_value,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("cp_*.json"))


async def test_numbering_latest_and_list(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "cps", max_checkpoints=None)
    assert await manager.latest() is None
    assert await manager.list() == []
    for n in range(3):
        info = await manager.save(Checkpoint(description=f"cp {n}", last_input=f"in {n}"))
        assert info.number == n + 1
        assert info.path.name == f"cp_{n + 1:03d}.json"
    assert files(tmp_path / "cps") == ["cp_001.json", "cp_002.json", "cp_003.json"]
    latest = await manager.latest()
    assert latest is not None
    assert latest.description == "cp 2"
    assert (await manager.load(1)).last_input == "in 0"
    listed = await manager.list()
    assert [(i.number, i.description, i.version) for i in listed] == [
        (1, "cp 0", "1.0.0"),
        (2, "cp 1", "1.0.0"),
        (3, "cp 2", "1.0.0"),
    ]
    with pytest.raises(ConfigError, match="cannot read checkpoint"):
        await manager.load(9)


async def test_rollback_and_numbers_are_never_reused(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, max_checkpoints=None)
    assert await manager.rollback() is None
    for n in range(3):
        await manager.save(Checkpoint(description=f"cp {n + 1}"))
    previous = await manager.rollback()
    assert previous is not None
    assert previous.description == "cp 2"
    assert files(tmp_path) == ["cp_001.json", "cp_002.json"]
    info = await manager.save(Checkpoint(description="after rollback"))
    assert info.number == 4  # 3 was handed out once: never again
    # A newer file written by someone else is never overwritten: numbering goes past it.
    stranger = tmp_path / "cp_010.json"
    stranger.write_text(Checkpoint(description="stranger").to_json())
    info = await manager.save(Checkpoint(description="mine"))
    assert info.number == 11
    assert (await manager.load(10)).description == "stranger"
    for _ in range(4):
        await manager.rollback()
    assert files(tmp_path) == ["cp_001.json"]
    assert await manager.rollback() is None
    assert files(tmp_path) == []
    assert (await manager.save(Checkpoint())).number == 12


async def test_pruning_keeps_the_newest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, max_checkpoints=2)
    for n in range(5):
        await manager.save(Checkpoint(description=str(n)))
    assert files(tmp_path) == ["cp_004.json", "cp_005.json"]
    assert [i.description for i in await manager.list()] == ["3", "4"]
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # noqa: ASYNC240
    assert hidden == [".cp_last"]  # no temporary file is left behind
    with pytest.raises(ConfigError):
        CheckpointManager(tmp_path, max_checkpoints=0)


@pytest.mark.parametrize("hard_links", [True, False])
async def test_concurrent_saves_never_collide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hard_links: bool
) -> None:
    if not hard_links:  # a filesystem without them: the exclusive-create fallback

        def refuse(*args: object, **kwargs: object) -> None:
            raise OSError(errno.EPERM, "hard links not supported")

        monkeypatch.setattr(os, "link", refuse)
    # Two managers on one directory stand for two processes.
    first = CheckpointManager(tmp_path, max_checkpoints=None)
    second = CheckpointManager(tmp_path, max_checkpoints=None)
    numbers: list[int] = []

    async def save(manager: CheckpointManager, n: int) -> None:
        numbers.append((await manager.save(Checkpoint(description=str(n)))).number)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            for n in range(20):
                group.start_soon(save, first if n % 2 else second, n)
    assert sorted(numbers) == list(range(1, 21))
    descriptions = {(await first.load(n)).description for n in numbers}
    assert descriptions == {str(n) for n in range(20)}
    assert not list(tmp_path.glob("*.slf-tmp"))  # noqa: ASYNC240 - a tiny test directory


def write_version(path: Path, version: str) -> None:
    data = Checkpoint(description=version).to_dict()
    data["version"] = version
    path.write_text(json.dumps(data))


async def test_version_rules(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, max_checkpoints=None)
    write_version(tmp_path / "cp_001.json", "2.0.0")
    write_version(tmp_path / "cp_002.json", "1.3.0")
    write_version(tmp_path / "cp_003.json", "1.0.9")
    with pytest.raises(ConfigError, match="major version"):
        await manager.load(1)
    with pytest.warns(UserWarning, match="minor version"):
        assert (await manager.load(2)).version == "1.3.0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (await manager.load(3)).version == "1.0.9"
        listed = await manager.list()  # headers only: no rules, no warnings
    assert [i.version for i in listed] == ["2.0.0", "1.3.0", "1.0.9"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "must be JSON"),
        ("[1, 2]", "JSON object"),
        ('{"version": "one"}', "MAJOR.MINOR.PATCH"),
        ('{"version": "1.0.0", "history": "oops"}', "malformed checkpoint at history"),
        ('{"version": "1.0.0", "counters": {"steps": "many"}}', "counters.steps"),
    ],
)
def test_malformed_checkpoints_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Checkpoint.from_json(text)


def test_serialize_value_degrades_to_strings() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    value = {"a": (1, Thing()), 2: {"b": None}, "c": [True, 1.5]}
    assert serialize_value(value) == {"a": [1, "a thing"], "2": {"b": None}, "c": [True, 1.5]}


HISTORY = [
    {"role": "system", "content": "You help."},
    {"role": "user", "content": "my name is Alice"},
    {"role": "assistant", "content": "Hello Alice."},
]


async def test_capture_save_load_restore(tmp_path: Path) -> None:
    now = [1000.0]
    store = InMemoryStore(clock=lambda: now[0])
    memory = store.scope("helper", "s1")
    await memory.set("old", "first")
    await memory.set("name", "Alice", ttl=100)
    selfref = SelfReference()
    selfref.bind_history("main", HISTORY)
    selfref.remember("main", "The user is called Alice.")
    recorder = TraceRecorder()
    recorder.load([TraceRecord(0, "llm", "mock-model", 1.0, 5.0, total_tokens=12)])
    recorder.last_input = "my name is Alice"

    checkpoint = await Checkpoint.capture(
        history=HISTORY,
        memory=memory,
        self_reference=selfref,
        recorder=recorder,
        counters={"turns": 1},
        description="after turn 1",
        metadata={"when": object()},
    )
    assert checkpoint.last_input == "my name is Alice"
    assert checkpoint.counters["steps"] == 1
    assert checkpoint.counters["total_tokens"] == 12
    assert checkpoint.counters["turns"] == 1
    assert str(checkpoint.metadata["when"]).startswith("<object object")
    path = tmp_path / "one.json"
    await save_checkpoint(checkpoint, path)
    loaded = await load_checkpoint(path)
    assert loaded == Checkpoint.from_dict(json.loads(path.read_text()))
    assert loaded.history == tuple(HISTORY)
    assert [m.role for m in loaded.messages()] == ["system", "user", "assistant"]

    now[0] += 40
    fresh = InMemoryStore(clock=lambda: now[0]).scope("helper", "s1")
    await fresh.set("stale", "goes away")
    assert await loaded.restore_memory(fresh) == 2
    assert [i.key for i in await fresh.items()] == ["name", "old"]
    name = await fresh.get("name")
    assert name is not None
    assert name.remaining(now[0]) == 60  # the TTL left at the checkpoint, not a fresh one

    other = SelfReference()
    await loaded.restore_self_reference(other)
    assert other.get_history("main") == HISTORY
    assert other.get_experiences("main") == [{"id": "exp_1", "text": "The user is called Alice."}]

    restored = TraceRecorder()
    loaded.restore_trace(restored)
    assert restored.stats().total_tokens == 12


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


async def test_resume_history_into_a_new_llm_chat_call(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    @llm_chat(llm)
    async def chat(message: str, history: list[dict[str, Any]]) -> None:
        """You remember names."""

    mock_server.script(Reply.text("Nice to meet you, Alice."), Reply.text("Your name is Alice."))
    items: list[Any] = []
    with anyio.fail_after(GUARD):
        items = [item async for item in chat("my name is Alice", history=[])]
    history = items[-1][1]
    manager = CheckpointManager(tmp_path)
    await manager.save(await Checkpoint.capture(history=history, last_input="my name is Alice"))

    checkpoint = await CheckpointManager(tmp_path).latest()  # as a new process would
    assert checkpoint is not None
    with anyio.fail_after(GUARD):
        items = [item async for item in chat("what is my name?", history=list(checkpoint.history))]
    assert items[-1][0] == "Your name is Alice."
    sent = [(m["role"], m["content"]) for m in mock_server.requests[1].json["messages"]]
    assert sent == [
        ("system", "You remember names."),
        ("user", "my name is Alice"),
        ("assistant", "Nice to meet you, Alice."),
        ("user", "what is my name?"),
    ]


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


async def test_checkpoint_every_n_steps_and_resume_the_run(
    mock_server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    manager = CheckpointManager(tmp_path)
    memory = InMemoryStore().scope("adder")
    await memory.set("hint", "use add")
    hook = CheckpointHook(manager, every=2, memory=memory)
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="a1")),
        Reply.tool_calls(ToolCallSpec("add", {"a": 3, "b": 3}, id="a2")),
        Reply.tool_calls(ToolCallSpec("add", {"a": 6, "b": 4}, id="a3")),
        Reply.text("The sum is 10."),
    )
    invocation = Invocation(llm, system_prompt="Add.", tools=(add,), hooks=(hook,))
    transcript = Transcript(
        list(Checkpoint(history=({"role": "user", "content": "1+2+3+4?"},)).messages())
    )
    emitter = Emitter(None, EventOrigin(agent_call_id="run1"), wants_events=False)
    with anyio.fail_after(GUARD):
        result = await Run(invocation, transcript, emitter).result()
    assert result.text == "The sum is 10."
    assert [i.number for i in hook.saved] == [1]  # after iteration 2 only
    checkpoint = await manager.latest()
    assert checkpoint is not None
    assert checkpoint.description == "after iteration 2"
    assert checkpoint.last_input == "1+2+3+4?"
    assert checkpoint.counters == {"iteration": 2}
    assert [m["key"] for m in checkpoint.memory] == ["hint"]
    assert checkpoint.history[-1] == {"role": "tool", "tool_call_id": "a2", "content": "6"}

    # Resume: the engine continues right after the saved tool results.
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 6, "b": 4}, id="a3")),
        Reply.text("The sum is 10."),
    )
    resumed = Invocation(llm, system_prompt="Add.", tools=(add,))
    emitter = Emitter(None, EventOrigin(agent_call_id="run2"), wants_events=False)
    with anyio.fail_after(GUARD):
        again = await Run(resumed, Transcript(list(checkpoint.messages())), emitter).result()
    assert again.text == "The sum is 10."
    first_resumed = mock_server.requests[4].json["messages"]
    assert first_resumed[-1] == {"role": "tool", "tool_call_id": "a2", "content": "6"}
    with pytest.raises(ConfigError):
        CheckpointHook(manager, every=0)


async def test_shared_memory_state_and_the_seeds_save_context(tmp_path: Path) -> None:
    from simplellmfunc.runtime.checkpoints import load_context, save_context
    from simplellmfunc.runtime.multiagent import SharedMemory

    team = SharedMemory(namespace="main")
    await team.set("counter", 42)
    await team.set("trend", "up")
    path = tmp_path / "checkpoint.json"
    history = [{"role": "user", "content": "analyse"}, {"role": "assistant", "content": "done"}]
    written = await save_context(
        path, last_input="analyse", history=history, shared_memories={"main": team}
    )
    assert json.loads(path.read_text())["shared_memories"] == {
        "main": {"counter": 42, "trend": "up"}
    }
    loaded = await load_context(path)
    assert loaded == written
    assert (loaded.last_input, list(loaded.history)) == ("analyse", history)
    fresh = SharedMemory(namespace="main")
    assert await loaded.restore_shared_memory(fresh) == 2
    assert await fresh.snapshot() == {"counter": 42, "trend": "up"}
    with pytest.raises(ConfigError, match="no shared memory 'other' \\(it has: main\\)"):
        await loaded.restore_shared_memory(fresh, "other")
