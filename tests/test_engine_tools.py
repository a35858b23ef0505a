"""The engine's tool phase at the wire: errors, parallel batches, timeouts, the cap, threads."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from PIL import Image

from simplellmfunc import ImgPath, OpenAICompatible, Tool, llm_chat, tool
from simplellmfunc.engine import FINAL_ANSWER_INSTRUCTION
from simplellmfunc.hooks import (
    EventYield,
    ReactEndEvent,
    ResponseYield,
    ToolCallEndEvent,
    ToolCallErrorEvent,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
def server(mock_server: MockLLMServer) -> MockLLMServer:
    return mock_server  # from conftest.py, like the leak check run around every test


@pytest.fixture
async def llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", server.url) as model:
        yield model


async def run_events(agent: Any, *args: Any, **kwargs: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(agent(*args, **kwargs)) as items:
            return [item async for item in items]


def end_of(items: list[Any]) -> ReactEndEvent:
    ends = [i.event for i in items if isinstance(i, EventYield)]
    assert isinstance(ends[-1], ReactEndEvent)
    return ends[-1]


def events(items: list[Any], kind: type[Any]) -> list[Any]:
    return [i.event for i in items if isinstance(i, EventYield) and isinstance(i.event, kind)]


def tool_messages(server: MockLLMServer, request: int) -> dict[str, str]:
    """tool_call_id → content of the tool messages the model received in request ``request``."""
    messages = server.requests[request].json["messages"]
    return {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"cannot do {reason}")


# -- tool errors become results the model can act on ---------------------------------------


async def test_raising_tool_becomes_error_result(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("explode", {"reason": "magic"}, id="c1")),
        Reply.text("sorry"),
    )

    @llm_chat(llm, toolkit=[explode], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    assert tool_messages(server, 1) == {"c1": "Error: ValueError: cannot do magic"}
    (error,) = events(items, ToolCallErrorEvent)
    assert (error.tool_call_id, error.error_type) == ("c1", "ValueError")
    (end,) = events(items, ToolCallEndEvent)
    assert end.success is False
    assert "Traceback" not in end.result
    assert end_of(items).final_response == "sorry"


async def test_unknown_tool_names_the_real_ones(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.tool_calls(ToolCallSpec("ad", {"a": 1}, id="c1")), Reply.text("ok"))

    @llm_chat(llm, toolkit=[add, explode], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    text = tool_messages(server, 1)["c1"]
    assert "no tool named 'ad'" in text
    assert "Did you mean 'add'?" in text
    assert "add, explode" in text
    assert events(items, ToolCallErrorEvent)[0].error_type == "UnknownTool"


async def test_invalid_json_arguments(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", '{"a": 1,, "b": 2}', id="c1")), Reply.text("ok")
    )

    @llm_chat(llm, toolkit=[add], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    text = tool_messages(server, 1)["c1"]
    assert text.startswith("Error: the arguments of add are not valid JSON")
    assert events(items, ToolCallErrorEvent)[0].error_type == "InvalidArguments"


async def test_validation_error_names_the_field(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": "one", "b": 2}, id="c1")), Reply.text("ok")
    )

    @llm_chat(llm, toolkit=[add])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async for _ in agent("go", history=[]):
            pass
    text = tool_messages(server, 1)["c1"]
    assert text.startswith("Error: invalid arguments: a: ")
    assert "valid integer" in text
    assert "parameter schema" in text  # the hint to call again


async def test_one_failure_does_not_cancel_siblings(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(
            ToolCallSpec("explode", {"reason": "x"}, id="c1"),
            ToolCallSpec("add", {"a": 2, "b": 3}, id="c2"),
        ),
        Reply.text("done"),
    )

    @llm_chat(llm, toolkit=[add, explode], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    assert tool_messages(server, 1) == {"c1": "Error: ValueError: cannot do x", "c2": "5"}
    assert sorted(e.success for e in events(items, ToolCallEndEvent)) == [False, True]


# -- parallel batches --------------------------------------------------------------------------


async def test_cancelling_the_caller_cancels_and_waits_for_every_call_of_a_batch(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    # The batch runs its calls as tasks: a caller's cancel scope reaches each of them, and the
    # scope is left only once every call has finished unwinding (nothing runs on after it).
    calls = [ToolCallSpec("hang", {}, id=f"c{i}") for i in range(4)]
    server.script(Reply.tool_calls(*calls), Reply.text("never"))
    started: list[bool] = []
    unwound: list[bool] = []
    all_started = anyio.Event()

    @tool
    async def hang() -> str:
        """Wait forever."""
        try:
            started.append(True)
            if len(started) == len(calls):
                all_started.set()
            await anyio.sleep_forever()
        finally:
            await anyio.lowlevel.cancel_shielded_checkpoint()  # unwinding takes a loop turn
            unwound.append(True)
        return "unreachable"

    @llm_chat(llm, toolkit=[hang])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:

            async def consume() -> None:
                async for _ in agent("go", history=[]):
                    pass

            group.start_soon(consume)
            await all_started.wait()
            group.cancel_scope.cancel()
    assert unwound == [True] * 4
    assert len(server.requests) == 1


async def test_batch_runs_concurrently_results_in_call_order(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    ping_started, pong_done = anyio.Event(), anyio.Event()

    @tool
    async def ping() -> str:
        """Waits for pong: would deadlock if the batch ran sequentially."""
        ping_started.set()
        await pong_done.wait()
        return "ping"

    @tool
    async def pong() -> str:
        """Waits for ping to start."""
        await ping_started.wait()
        pong_done.set()
        return "pong"

    server.script(
        Reply.tool_calls(ToolCallSpec("ping", id="c1"), ToolCallSpec("pong", id="c2")),
        Reply.text("both"),
    )

    @llm_chat(llm, toolkit=[ping, pong], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    finished = [e.tool_call_id for e in events(items, ToolCallEndEvent)]
    assert finished == ["c2", "c1"]  # pong finished first...
    messages = server.requests[1].json["messages"]
    assert [m.get("tool_call_id") for m in messages if m["role"] == "tool"] == ["c1", "c2"]
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["ping", "pong"]
    history_from_dicts(items[-1].messages)


async def test_max_tool_concurrency_limits_a_batch(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    running, peak = 0, 0

    @tool
    async def work(n: int) -> int:
        """Work a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        running -= 1
        return n

    calls = [ToolCallSpec("work", {"n": n}, id=f"c{n}") for n in range(4)]
    server.script(Reply.tool_calls(*calls), Reply.text("ok"))

    @llm_chat(llm, toolkit=[work], max_tool_concurrency=2)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async for _ in agent("go", history=[]):
            pass
    assert peak == 2
    assert tool_messages(server, 1) == {f"c{n}": str(n) for n in range(4)}


# -- timeouts ------------------------------------------------------------------------------


async def test_tool_timeout_from_llm_chat(server: MockLLMServer, llm: OpenAICompatible) -> None:
    @tool
    async def hang() -> str:
        """Never returns."""
        await anyio.sleep_forever()
        return "never"

    server.script(
        Reply.tool_calls(
            ToolCallSpec("hang", id="c1"), ToolCallSpec("add", {"a": 1, "b": 1}, id="c2")
        ),
        Reply.text("ok"),
    )

    @llm_chat(llm, toolkit=[hang, add], enable_event=True, tool_timeout=0.05)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    results = tool_messages(server, 1)
    assert results == {"c1": "Error: tool hang timed out after 0.05 seconds", "c2": "2"}
    assert events(items, ToolCallErrorEvent)[0].error_type == "Timeout"
    assert "tool_timeout" not in server.requests[0].json  # an engine option, not a body param


async def test_timeout_of_a_tool_object(server: MockLLMServer, llm: OpenAICompatible) -> None:
    async def slow() -> str:
        await anyio.sleep_forever()
        return "never"

    slow_tool = Tool(name="slow", description="Slow.", func=slow, timeout=0.05)
    server.script(Reply.tool_calls(ToolCallSpec("slow", id="c1")), Reply.text("ok"))

    @llm_chat(llm, toolkit=[slow_tool], tool_timeout=60)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async for _ in agent("go", history=[]):
            pass
    assert tool_messages(server, 1) == {"c1": "Error: tool slow timed out after 0.05 seconds"}


# -- the max_tool_calls cap --------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_cap_forces_a_final_answer_without_tools(
    server: MockLLMServer, llm: OpenAICompatible, stream: bool
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")),
        Reply.tool_calls(ToolCallSpec("add", {"a": 3, "b": 4}, id="c2")),
        Reply.text("final answer", chunks=3),
    )

    @llm_chat(llm, toolkit=[add], max_tool_calls=2, stream=stream, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    bodies = [r.json for r in server.requests]
    assert len(bodies) == 3
    assert all("tools" in b for b in bodies[:2])
    final = bodies[2]
    assert "tools" not in final
    assert "tool_choice" not in final
    assert final["messages"][-1] == {"role": "user", "content": FINAL_ANSWER_INSTRUCTION}
    assert final.get("stream", False) is stream
    end = end_of(items)
    assert (end.terminated_by, end.final_response) == ("max_steps", "final answer")
    # The instruction is compile-time context, not part of the history.
    assert FINAL_ANSWER_INSTRUCTION not in json.dumps(items[-1].messages)
    assert items[-1].messages[-1] == {"role": "assistant", "content": "final answer"}


async def test_cap_ignores_tool_calls_in_the_final_reply(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")),
        Reply.tool_calls(ToolCallSpec("add", {"a": 3, "b": 4}, id="c2"), text="7, I think"),
    )

    @llm_chat(llm, toolkit=[add], max_tool_calls=1)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        outputs = [item async for item in agent("go", history=[])]
    text, history = outputs[-1]
    assert text == "7, I think"
    history_from_dicts(history)  # the ignored call left no unanswered tool call behind
    assert "tool_calls" not in history[-1]


# -- threads, multimodal results, injected parameters ---------------------------------------


async def test_sync_tool_runs_in_a_worker_thread(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    @tool
    def where() -> str:
        """Report the thread it runs in."""
        return str(threading.get_ident())

    server.script(Reply.tool_calls(ToolCallSpec("where", id="c1")), Reply.text("ok"))

    @llm_chat(llm, toolkit=[where])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async for _ in agent("go", history=[]):
            pass
    assert tool_messages(server, 1)["c1"] != str(threading.get_ident())
    assert where() == str(threading.get_ident())  # @tool leaves the function callable


async def test_image_result_is_restructured_into_a_user_message(
    server: MockLLMServer, llm: OpenAICompatible, tmp_path: Path
) -> None:
    path = tmp_path / "chart.png"
    Image.new("RGB", (3, 3), "blue").save(path)

    @tool
    async def chart() -> tuple[str, ImgPath]:
        """Draw a chart."""
        return ("the chart", ImgPath(path))

    server.script(
        Reply.tool_calls(
            ToolCallSpec("chart", id="c1"), ToolCallSpec("add", {"a": 1, "b": 1}, id="c2")
        ),
        Reply.text("a blue square"),
    )

    @llm_chat(llm, toolkit=[chart, add])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        outputs = [item async for item in agent("go", history=[])]
    sent = server.requests[1].json["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]
    parts = sent[-1]["content"]
    assert parts[0] == {"type": "text", "text": "the chart"}
    assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
    history = outputs[-1][1]
    history_from_dicts(history)
    assert history[-1] == {"role": "assistant", "content": "a blue square"}


async def test_results_of_a_batch_event_and_emitter_injection(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    @tool
    async def noisy(event_emitter: Any, n: int) -> int:
        """Emit progress.

        Args:
            n: How far to count.
        """
        for i in range(n):
            await event_emitter.emit("progress", i)
        return n

    server.script(Reply.tool_calls(ToolCallSpec("noisy", {"n": 2}, id="c1")), Reply.text("ok"))

    @llm_chat(llm, toolkit=[noisy], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await run_events(agent, "go", history=[])
    schema = server.requests[0].json["tools"][0]["function"]["parameters"]
    assert list(schema["properties"]) == ["n"]  # the emitter is injected, never shown
    customs = [i for i in items if isinstance(i, EventYield) and i.event.kind == "custom"]
    assert [c.event.data for c in customs] == [0, 1]
    assert {(c.origin.tool_name, c.origin.tool_call_id) for c in customs} == {("noisy", "c1")}
    assert isinstance(items[-1], ResponseYield)
