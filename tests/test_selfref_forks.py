"""SelfReference forks: ``runtime.selfref.fork.spawn / gather_all`` with real kernels.

The mock LLM server answers with one callable that routes each request by the memory key named in
its system prompt (the memory contract names the key of the agent that asks), so the parent and
its forks each get their own script, whatever order their requests arrive in.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import psutil
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat
from simplellmfunc.builtin import PyRepl, SelfReference
from simplellmfunc.builtin.pyrepl._reaper import live_count
from simplellmfunc.hooks import (
    CustomEvent,
    EventYield,
    ReactEndEvent,
    ReactStartEvent,
    ResponseYield,
    ToolCallStartEvent,
)
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

Route = Callable[[list[dict[str, Any]]], Reply]
_KEY = re.compile(r'memory\["([^"]+)"\]')


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"orphan processes: {left}"
    assert live_count() == 0


@pytest.fixture
async def llm() -> AsyncIterator[tuple[MockLLMServer, OpenAICompatible]]:
    async with MockLLMServer() as server:
        interface = OpenAICompatible("sk-test-123456789", "mock", server.url)
        try:
            yield server, interface
        finally:
            await interface.aclose()


def route(server: MockLLMServer, routes: dict[str, Route]) -> None:
    """Answer every request with the route of the memory key its system prompt names."""

    def answer(request: RecordedRequest) -> Reply:
        messages = request.json["messages"]
        match = _KEY.search(messages[0]["content"])
        assert match is not None, "no memory contract in the system prompt"
        return routes[match.group(1)](messages)

    server.default = answer


def code_then(code: str, final: Callable[[list[dict[str, Any]]], str]) -> Route:
    """Run ``code`` with execute_code, then answer ``final(messages)``."""

    def reply(messages: list[dict[str, Any]]) -> Reply:
        if messages[-1]["role"] != "tool":
            return Reply.tool_calls(ToolCallSpec("execute_code", {"code": code}))
        return Reply.text(final(messages))

    return reply


def last_tool_output(messages: list[dict[str, Any]]) -> str:
    return str(messages[-1]["content"])


def make_agent(
    interface: OpenAICompatible, repl: PyRepl, sr: SelfReference, *, events: bool = True
) -> Any:
    @llm_chat(
        interface,
        toolkit=repl.toolset,
        self_reference=sr,
        self_reference_key="agent_main",
        enable_event=events,
    )
    async def agent(message: str, history: Any = None) -> None:
        """You are a careful agent that splits work into forks."""

    return agent


def of_fork(items: list[Any], fork_id: str | None) -> list[EventYield]:
    return [i for i in items if isinstance(i, EventYield) and i.origin.fork_id == fork_id]


def custom(items: list[Any], name: str) -> list[EventYield]:
    return [
        i
        for i in items
        if isinstance(i, EventYield)
        and isinstance(i.event, CustomEvent)
        and i.event.event_name == name
    ]


PARENT_SPAWN_AND_GATHER = """
import json, os
parent_secret = 41
first = runtime.selfref.fork.spawn("Check whether parent_secret exists", "Use execute_code")
second = runtime.selfref.fork.spawn("Say hello", "Answer with JSON directly")
results = runtime.selfref.fork.gather_all(include_history=True)
with open("forks.json", "w") as f:
    kernel = os.environ["SIMPLELLMFUNC_KERNEL"]
    json.dump({"kernel": kernel, "spawned": [first, second], "results": results}, f)
print(sorted(results))
"""

# A kernel's marker names it (its pid may not: each sandboxed kernel is pid 2 in its namespace).
CHILD_PROBE = "import os\nprint('parent_secret' in globals(), os.environ['SIMPLELLMFUNC_KERNEL'])"


def expects_experience(messages: list[dict[str, Any]]) -> Reply:
    # A fork starts with its parent's experiences (same ids).
    assert "- [exp_1] shared fact" in messages[0]["content"]
    return Reply.text('{"hello": "world"}')


async def test_spawn_twice_and_gather_all(llm: Any, tmp_path: Path) -> None:
    server, interface = llm
    sr = SelfReference()
    route(
        server,
        {
            "agent_main": code_then(PARENT_SPAWN_AND_GATHER, lambda m: "both forks reported"),
            "agent_main::fork::1": code_then(
                CHILD_PROBE, lambda m: json.dumps({"probe": last_tool_output(m)})
            ),
            "agent_main::fork::2": expects_experience,
        },
    )
    sr.remember("agent_main", "shared fact")
    earlier = [
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
    ]
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr)
        items = [item async for item in agent("split the work", history=earlier)]
        assert live_count() == 1  # the forks' kernels are closed already
    final = items[-1]
    assert isinstance(final, ResponseYield)
    assert final.response == "both forks reported"
    report = json.loads((tmp_path / "forks.json").read_text())
    assert [s["fork_id"] for s in report["spawned"]] == ["fork_1", "fork_2"]
    assert [s["status"] for s in report["spawned"]] == ["running", "running"]
    one, two = report["results"]["fork_1"], report["results"]["fork_2"]
    assert (one["status"], two["status"]) == ("completed", "completed")
    assert two["response"] == '{"hello": "world"}'
    assert two["result"] == {"hello": "world"}
    assert one["error"] is None
    # The child's kernel is not the parent's: the variable is absent, the process differs.
    visible, kernel = one["result"]["probe"].split("[stdout]\n")[1].split()
    assert visible == "False"
    assert kernel != report["kernel"]
    # Histories start from the pre-fork snapshot: the parent's messages, not its tool call.
    history = one["history"]
    assert [m["content"] for m in history[1:4]] == [
        "earlier question",
        "earlier answer",
        "split the work",
    ]
    assert history[4]["role"] == "user"
    assert history[4]["content"].startswith("[Fork task]\nCheck whether parent_secret exists")
    assert "parent_secret = 41" not in json.dumps(history)
    assert history[0]["content"].count('memory["agent_main::fork::1"]') >= 1
    assert 'memory["agent_main"]' not in history[0]["content"]
    assert [m["role"] for m in history[5:]] == ["assistant", "tool", "assistant"]
    # Per-fork usage (2 and 1 calls of 10 + 5 tokens) is in the parent's total (2 calls).
    assert (one["usage"]["calls"], two["usage"]["calls"]) == (2, 1)
    parent_end = [i for i in of_fork(items, None) if isinstance(i.event, ReactEndEvent)]
    assert len(parent_end) == 1
    total = parent_end[0].event.total_usage
    assert (total.calls, total.prompt_tokens, total.completion_tokens) == (5, 50, 25)
    # Events of the children stream into the parent's stream with their fork origin.
    parent_call = parent_end[0].origin.agent_call_id
    # ... and the parent's tool call that started them (a front end draws them in its card).
    (spawning, *_) = [
        e.event.tool_call_id
        for e in of_fork(items, None)
        if isinstance(e.event, ToolCallStartEvent)
    ]
    for fork_id in ("fork_1", "fork_2"):
        events = of_fork(items, fork_id)
        assert {e.origin.parent_tool_call_id for e in events} == {spawning}
        assert any(isinstance(e.event, ReactStartEvent) for e in events)
        assert any(isinstance(e.event, ReactEndEvent) for e in events)
        assert {(e.origin.fork_depth, e.origin.parent_call_id) for e in events} == {
            (1, parent_call)
        }
    assert any(isinstance(e.event, ToolCallStartEvent) for e in of_fork(items, "fork_1"))
    ends = {e.origin.fork_id: e.event.data["status"] for e in custom(items, "selfref_fork_end")}
    assert ends == {"fork_1": "completed", "fork_2": "completed"}
    # Memory: each fork has its own key; the parent key keeps the fork handles.
    forks = sr.get_forks("agent_main")
    assert {k: v["status"] for k, v in forks.items()} == {
        "fork_1": "completed",
        "fork_2": "completed",
    }
    assert forks["fork_1"]["memory_key"] == "agent_main::fork::1"
    assert sr.get_history("agent_main::fork::1")[-1]["role"] == "assistant"


NEST = """
import json
spawned = runtime.selfref.fork.spawn("Go one level deeper", "Try to fork again")
results = runtime.selfref.fork.gather_all()
print(json.dumps(results))
"""

TRY_SPAWN = """
try:
    runtime.selfref.fork.spawn("too deep", "")
except Exception as exc:
    print(type(exc).__name__, exc)
"""


async def test_nested_forks_and_depth_limit(llm: Any, tmp_path: Path) -> None:
    server, interface = llm
    sr = SelfReference()  # max_fork_depth=2: the root's forks may fork once more
    route(
        server,
        {
            "agent_main": code_then(NEST, last_tool_output),
            "agent_main::fork::1": code_then(NEST, last_tool_output),
            "agent_main::fork::1::fork::1": code_then(TRY_SPAWN, last_tool_output),
        },
    )
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr)
        items = [item async for item in agent("nest")]
    final = items[-1]
    assert isinstance(final, ResponseYield)
    outer = json.loads(final.response.split("[stdout]\n")[1])["fork_1"]
    assert outer["status"] == "completed"
    inner = json.loads(outer["response"].split("[stdout]\n")[1])["fork_1.1"]
    assert inner["status"] == "completed"
    assert inner["memory_key"] == "agent_main::fork::1::fork::1"
    assert "fork depth limit reached" in inner["response"]
    assert "at fork depth 2 and max_fork_depth is 2" in inner["response"]
    deep = of_fork(items, "fork_1.1")
    middle = of_fork(items, "fork_1")
    assert deep
    assert {e.origin.fork_depth for e in deep} == {2}
    assert {e.origin.parent_call_id for e in deep} == {middle[0].origin.agent_call_id}


SPAWN_TWO = """
import json
spawned = [runtime.selfref.fork.spawn(t, "") for t in ("will fail", "will answer")]
results = runtime.selfref.fork.gather_all()
print(json.dumps({"spawned": spawned, "results": results}))
"""


async def test_failing_fork_is_reported_and_extra_spawns_queue(llm: Any, tmp_path: Path) -> None:
    server, interface = llm
    sr = SelfReference(max_concurrent_forks=1)
    route(
        server,
        {
            "agent_main": code_then(SPAWN_TWO, lambda m: "reported"),
            # Slow to fail: still running when the second spawn comes, however loaded the machine.
            "agent_main::fork::1": lambda m: Reply.error(400, "bad request for the fork", ttft=2.0),
            "agent_main::fork::2": lambda m: Reply.text("fine"),
        },
    )
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr)
        items = [item async for item in agent("go")]
    final = items[-1]
    assert isinstance(final, ResponseYield)
    assert final.response == "reported"
    tool_output = next(m for m in final.messages if m["role"] == "tool")["content"]
    report = json.loads(tool_output.split("[stdout]\n")[1])
    assert [s["status"] for s in report["spawned"]] == ["running", "queued"]
    failed, fine = report["results"]["fork_1"], report["results"]["fork_2"]
    assert failed["status"] == "failed"
    assert "bad request for the fork" in failed["error"]
    assert failed["response"] is None
    assert failed["result"] is None
    assert (fine["status"], fine["response"], fine["result"]) == ("completed", "fine", "fine")
    assert sr.get_forks("agent_main")["fork_1"]["status"] == "failed"


SPAWN_AND_WAIT = """
runtime.selfref.fork.spawn("sleep for a long time", "")
runtime.selfref.fork.gather_all()
"""

SLEEP = "import time\nprint('sleeping', flush=True)\ntime.sleep(60)"


async def test_abort_of_the_parent_cancels_running_forks(llm: Any, tmp_path: Path) -> None:
    server, interface = llm
    sr = SelfReference()
    route(
        server,
        {
            "agent_main": code_then(SPAWN_AND_WAIT, lambda m: "unreachable"),
            "agent_main::fork::1": code_then(SLEEP, lambda m: "unreachable"),
        },
    )
    signal = AbortSignal()
    items: list[Any] = []
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr)
        async for item in agent("go", _abort_signal=signal):
            items.append(item)
            if (
                isinstance(item, EventYield)
                and item.origin.fork_id == "fork_1"
                and isinstance(item.event, CustomEvent)
                and item.event.event_name == "kernel_stdout"
            ):
                signal.abort("user stop")
        assert live_count() == 1  # the fork's kernel is gone, the parent's remains
    ends = [i for i in of_fork(items, None) if isinstance(i.event, ReactEndEvent)]
    assert ends[0].event.aborted
    assert ends[0].event.abort_reason == "user stop"
    fork_end = custom(items, "selfref_fork_end")
    assert [(e.origin.fork_id, e.event.data["status"]) for e in fork_end] == [
        ("fork_1", "cancelled")
    ]
    assert sr.get_forks("agent_main")["fork_1"]["status"] == "cancelled"
    # The usage of the fork's one LLM call is in the parent's total.
    assert ends[0].event.total_usage.calls == 2


async def test_leaving_the_stream_early_cancels_running_forks(llm: Any, tmp_path: Path) -> None:
    server, interface = llm
    sr = SelfReference()
    route(
        server,
        {
            "agent_main": code_then(SPAWN_AND_WAIT, lambda m: "unreachable"),
            "agent_main::fork::1": code_then(SLEEP, lambda m: "unreachable"),
        },
    )
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr)
        async with aclosing(agent("go")) as stream:
            async for item in stream:
                if (
                    isinstance(item, EventYield)
                    and item.origin.fork_id == "fork_1"
                    and isinstance(item.event, CustomEvent)
                    and item.event.event_name == "kernel_stdout"
                ):
                    break
        assert live_count() == 1
    assert sr.get_forks("agent_main")["fork_1"]["status"] == "cancelled"


SPAWN_ONLY = 'print(runtime.selfref.fork.spawn("a slow task", "")["status"])'


async def test_forks_running_at_the_end_are_cancelled_in_plain_mode(
    llm: Any, tmp_path: Path
) -> None:
    server, interface = llm
    sr = SelfReference()
    route(
        server,
        {
            "agent_main": code_then(SPAWN_ONLY, lambda m: "done without waiting"),
            "agent_main::fork::1": lambda m: Reply.text("too late", ttft=30),
        },
    )
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        agent = make_agent(interface, repl, sr, events=False)
        items = [item async for item in agent("go")]
    text, history = items[-1]
    assert text == "done without waiting"
    assert "running" in history[-2]["content"]
    handle = sr.get_forks("agent_main")["fork_1"]
    assert handle["status"] == "cancelled"
    assert "parent turn ended" in handle["error"]


async def test_spawn_outside_a_turn_is_refused(tmp_path: Path) -> None:
    sr = SelfReference()
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        repl.attach_self_reference(sr)
        result = await repl.execute('runtime.selfref.fork.spawn("x", "")')
    assert result["error"] is not None
    assert "only inside execute_code during an @llm_chat turn" in result["error"]


def test_pyrepl_fork_copies_settings_and_packs(tmp_path: Path) -> None:
    sr = SelfReference()
    repl = PyRepl(tmp_path, 33.0, env={"A": "1"}, max_output_tokens=1234, log_dir=tmp_path)
    repl.attach_self_reference(sr)
    clone = repl.fork()
    assert clone is not repl
    assert clone.instance_id != repl.instance_id
    assert clone.working_directory == repl.working_directory
    assert clone.self_reference is sr
    assert clone.get_runtime_backend("selfref") is sr
    assert not clone.is_running
    assert [t.name for t in clone.toolset] == [t.name for t in repl.toolset]
    assert clone.toolset[0] is not repl.toolset[0]
