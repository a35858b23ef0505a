"""Events at the wire: order, live custom events, sequence numbers, usage, errors, hooks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.engine import (
    Emitter,
    Finished,
    Invocation,
    Run,
    RunHook,
    RunView,
    event_pump,
    pump_items,
    start_pump,
)
from simplellmfunc.exceptions import ProviderError, StreamError
from simplellmfunc.hooks import (
    CustomEvent,
    EventOrigin,
    EventYield,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    ReactEndEvent,
    ResponseYield,
    ToolEventEmitter,
    events_only,
    filter_events,
    responses_only,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import (
    ContextMutation,
    ExperienceRememberMutation,
    SystemMessage,
    Transcript,
    Usage,
    UserMessage,
    UserMessageMutation,
    history_from_dicts,
)

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
def server(mock_server: MockLLMServer) -> MockLLMServer:
    return mock_server  # from conftest.py, like the leak check run around every test


@pytest.fixture
async def llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", server.url) as model:
        yield model


async def collect(stream: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(stream) as items:
            return [item async for item in items]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_event_order_with_live_custom_events(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    seen_custom = anyio.Event()

    @tool
    async def report(event_emitter: ToolEventEmitter, topic: str) -> str:
        """Report on a topic, waiting until the consumer saw the progress event."""
        await event_emitter.emit("progress", {"topic": topic})
        await seen_custom.wait()  # deadlocks unless the event reached the consumer live
        return "reported"

    server.script(
        Reply.tool_calls(ToolCallSpec("report", {"topic": "rain"}, id="c1"), chunks=2),
        Reply.text("It rains.", chunks=3),
    )

    @llm_chat(llm, toolkit=[report], stream=True, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items: list[Any] = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("weather?", history=[])) as stream:
            async for item in stream:
                items.append(item)
                if isinstance(item, EventYield) and isinstance(item.event, CustomEvent):
                    seen_custom.set()
    kinds = [i.event.kind for i in items if isinstance(i, EventYield)]
    assert kinds == [
        "react_start",
        "react_iteration_start",
        "llm_call_start",
        "tool_call_arguments_delta",
        "tool_call_arguments_delta",
        "llm_call_end",
        "tool_calls_batch_start",
        "tool_call_start",
        "custom",
        "tool_call_end",
        "tool_calls_batch_end",
        "react_iteration_end",
        "react_iteration_start",
        "llm_call_start",
        "llm_chunk_arrive",
        "llm_chunk_arrive",
        "llm_chunk_arrive",
        "llm_call_end",
        "react_iteration_end",
        "react_end",
    ]
    assert isinstance(items[-1], ResponseYield)
    origins = [i.origin for i in items if isinstance(i, EventYield)]
    assert [o.seq for o in origins] == list(range(1, len(origins) + 1))
    assert len({o.agent_call_id for o in origins}) == 1
    custom = next(i for i in items if isinstance(i, EventYield) and i.event.kind == "custom")
    assert custom.event.data == {"topic": "rain"}
    assert (custom.origin.tool_name, custom.origin.tool_call_id) == ("report", "c1")
    chunks = [
        i.event for i in items if isinstance(i, EventYield) and i.event.kind == "llm_chunk_arrive"
    ]
    assert "".join(c.text for c in chunks) == "It rains."
    assert chunks[-1].accumulated_text == "It rains."
    deltas = [
        i.event
        for i in items
        if isinstance(i, EventYield) and i.event.kind == "tool_call_arguments_delta"
    ]
    assert "".join(d.arguments_delta for d in deltas) == '{"topic": "rain"}'
    assert {(d.tool_call_id, d.tool_name) for d in deltas} == {("c1", "report")}


async def test_cumulative_usage_is_the_sum_of_every_call(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}), usage=(10, 5)),
        Reply.tool_calls(ToolCallSpec("add", {"a": 3, "b": 4}), usage=(20, 7)),
        Reply.text("3 and 7", usage=Usage(30, 9, 39, cached_tokens=4, reasoning_tokens=2)),
    )

    @llm_chat(llm, toolkit=[add], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await collect(agent("add", history=[]))
    per_call = [
        i.event.usage
        for i in items
        if isinstance(i, EventYield) and isinstance(i.event, LLMCallEndEvent)
    ]
    assert [u.prompt_tokens for u in per_call] == [10, 20, 30]
    end = items[-2].event
    assert isinstance(end, ReactEndEvent)
    total = per_call[0] + per_call[1] + per_call[2]
    assert end.total_usage == total
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (60, 21, 81)
    assert (total.cached_tokens, total.reasoning_tokens, total.calls) == (4, 2, 3)
    assert (end.iterations, end.tool_calls, end.terminated_by) == (3, 2, "answer")


async def test_event_filters(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.default = Reply.text("hi")

    @llm_chat(llm, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    responses = await collect(responses_only(agent("a", history=[])))
    assert [r.response for r in responses] == ["hi"]
    only = await collect(events_only(agent("b", history=[])))
    assert all(isinstance(i, EventYield) for i in only)
    ends = await collect(filter_events(agent("c", history=[]), ReactEndEvent, LLMCallEndEvent))
    assert [i.event.kind for i in ends] == ["llm_call_end", "react_end"]


# -- provider errors end the run with the typed error -----------------------------------------


async def _drain(stream: Any, into: list[Any]) -> None:
    async with aclosing(stream) as items:
        async for item in items:
            into.append(item)


async def test_provider_error_after_retries_is_raised_with_an_event(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")),
        *[Reply.error(503, "overloaded", headers={"retry-after": "0"})] * 3,
    )

    @llm_chat(llm, toolkit=[add], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items: list[Any] = []
    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as caught:
        await _drain(agent("go", history=[]), items)
    assert caught.value.status == 503
    assert caught.value.attempts == 3
    assert len(server.requests) == 4
    events = [i.event for i in items]
    error = next(e for e in events if isinstance(e, LLMCallErrorEvent))
    assert (error.iteration, error.status, error.retryable) == (2, 503, True)
    end = events[-1]
    assert isinstance(end, ReactEndEvent)
    assert end.terminated_by == "error"
    assert end.error is not None
    assert "503" in end.error
    history_from_dicts(end.final_messages)  # the tool turn is complete and valid
    assert not any(isinstance(i, ResponseYield) for i in items)


async def test_provider_error_is_not_swallowed_in_text_mode(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.error(401, "bad key"))

    @llm_chat(llm)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as caught:
        await _drain(agent("go", history=[]), [])
    assert caught.value.status == 401


async def test_stream_error_is_raised(server: MockLLMServer, llm: OpenAICompatible) -> None:
    server.script(Reply.text("a broken reply", chunks=5, disconnect_after=3))

    @llm_chat(llm, stream=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    texts: list[Any] = []
    with anyio.fail_after(GUARD), pytest.raises(StreamError):
        await _drain(agent("go", history=[]), texts)
    assert texts  # the deltas before the break were delivered


async def test_llm_function_raises_the_provider_error(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.error(400, "bad request"))

    @llm_function(llm)
    async def answer(question: str) -> int:
        """Answer."""

    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as caught:
        await answer("q")
    assert caught.value.status == 400


# -- leaving early, reused ids ------------------------------------------------------------------


@pytest.mark.parametrize("enable_event", [False, True])
async def test_breaking_out_early_leaks_nothing(
    server: MockLLMServer, llm: OpenAICompatible, enable_event: bool
) -> None:
    server.script(Reply.text("slow stream", drip=0.005))

    @llm_chat(llm, stream=True, enable_event=enable_event)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[])) as stream:
            count = 0
            async for _ in stream:
                count += 1
                if count == 5:
                    break
    assert count == 5  # the autouse fixture checks that no task or socket is left


async def test_reused_tool_call_ids_are_renamed(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="call_0")),
        Reply.tool_calls(ToolCallSpec("add", {"a": 3, "b": 4}, id="call_0")),
        Reply.text("done"),
    )

    @llm_chat(llm, toolkit=[add])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        outputs = [o async for o in agent("go", history=[])]
    history = outputs[-1][1]
    history_from_dicts(history)
    ids = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert len(set(ids)) == 2


# -- run hooks (the SelfReference seam), through the engine API ----------------------------


class RecordingHook(RunHook):
    def __init__(self) -> None:
        self.before: list[int] = []
        self.after: list[int] = []
        self.ended: list[int] = []

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        self.before.append(run.iteration)
        if run.iteration == 1:
            return [UserMessageMutation({"content": "Remember: be brief."})]
        return ()

    async def after_tool_batch(self, run: RunView) -> Sequence[ContextMutation]:
        self.after.append(run.iteration)
        return [ExperienceRememberMutation("The user likes sums.")]

    async def on_end(self, run: RunView) -> None:
        self.ended.append(run.iteration)


async def test_hooks_contribute_mutations_before_calls_and_after_batches(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")), Reply.text("3"))
    hook = RecordingHook()
    invocation = Invocation(llm=llm, system_prompt="You add.", tools=(add,), hooks=(hook,))
    transcript = Transcript([SystemMessage("You add."), UserMessage("1+2?")])
    received: list[Any] = []

    async def send(item: Any) -> None:
        received.append(item)

    emitter = Emitter(send, EventOrigin(agent_call_id="run1"), wants_events=True)
    with anyio.fail_after(GUARD):
        result = await Run(invocation, transcript, emitter, user_input="1+2?").result()
    assert (result.text, result.terminated_by, result.iterations) == ("3", "answer", 2)
    assert (hook.before, hook.after, hook.ended) == ([1, 2], [1], [2])
    first = server.requests[0].json["messages"]
    assert first[-1] == {"role": "user", "content": "Remember: be brief."}
    second_system = server.requests[1].json["messages"][0]["content"]
    assert second_system.startswith("You add.")
    assert "## Experiences\n- [exp_1] The user likes sums." in second_system
    assert [e.text for e in transcript.experiences] == ["The user likes sums."]
    # Experiences are compile-time context: never stored in the messages.
    assert "Experiences" not in str(result.messages)
    assert {i.origin.agent_call_id for i in received} == {"run1"}


async def test_seq_is_monotonic_with_many_concurrent_emitters(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    @tool
    async def chatty(event_emitter: ToolEventEmitter, n: int) -> int:
        """Emit many events."""
        for i in range(60):
            await event_emitter.emit("tick", (n, i))
        return n

    calls = [ToolCallSpec("chatty", {"n": n}, id=f"c{n}") for n in range(8)]
    server.script(Reply.tool_calls(*calls), Reply.text("done"))

    @llm_chat(llm, toolkit=[chatty], enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items = await collect(agent("go", history=[]))
    seqs = [i.origin.seq for i in items if isinstance(i, EventYield)]
    assert seqs == list(range(1, len(seqs) + 1))
    ticks = [i.event.data for i in items if isinstance(i, EventYield) and i.event.kind == "custom"]
    assert len(ticks) == 8 * 60
    for n in range(8):  # each tool's events arrive in the order it emitted them
        assert [i for m, i in ticks if m == n] == list(range(60))


async def test_run_steps_and_on_end_when_left_early(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")), Reply.text("3"))
    hook = RecordingHook()
    invocation = Invocation(llm=llm, tools=(add,), hooks=(hook,))
    transcript = Transcript([UserMessage("1+2?")])
    emitter = Emitter(None, EventOrigin(), wants_events=False)
    with anyio.fail_after(GUARD):
        async with Run(invocation, transcript, emitter) as run:
            assert await run.step()  # the LLM phase: a tool call
            assert transcript.pending_tool_calls
            assert await run.step()  # the tool phase
            assert not transcript.pending_tool_calls
    # Left before the answer: the hooks heard of the end anyway, once.
    assert (hook.before, hook.after, hook.ended) == ([1], [1], [1])
    assert run.state.iteration == 1
    assert not await run.step()


async def test_on_end_runs_when_the_run_is_cancelled(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    arrived = anyio.Event()

    def slow(request: Any) -> Reply:
        arrived.set()
        return Reply.text("late", ttft=30)

    server.script(slow)
    hook = RecordingHook()
    invocation = Invocation(llm=llm, hooks=(hook,))
    emitter = Emitter(None, EventOrigin(), wants_events=False)
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(Run(invocation, Transcript([UserMessage("hi")]), emitter).result)
            await arrived.wait()
            group.cancel_scope.cancel()
    assert hook.ended == [1]


async def test_breaking_out_early_in_plain_mode(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1"), text="Adding."),
        Reply.text("3"),
    )
    hook = RecordingHook()

    class Agent(RunHook):  # a hook, through the SelfReference seam of @llm_chat
        def run_hook(self, key: str) -> RunHook:
            return hook

    @llm_chat(llm, toolkit=[add], self_reference=Agent())
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[])) as stream:
            async for text, _ in stream:
                assert text == "Adding."
                break
    assert len(server.requests) == 1  # the run stopped where the consumer left
    assert hook.ended == [1]


async def test_events_are_stamped_once_and_never_restamped_in_place() -> None:
    received: list[EventYield] = []

    async def send(item: Any) -> None:
        received.append(item)

    first = Emitter(send, EventOrigin(agent_call_id="run1"), wants_events=True, func_name="f")
    other = Emitter(send, EventOrigin(agent_call_id="run2"), wants_events=True, func_name="g")
    event = LLMCallErrorEvent(1, "ProviderError", "boom")
    await first.event(event)
    assert (received[0].event.trace_id, received[0].event.func_name) == ("run1", "f")
    await first.event(event)  # the same run again: already stamped, nothing to change
    assert (received[1].event.trace_id, received[1].event.func_name) == ("run1", "f")
    await other.event(event)  # another run: a stamped copy; what run1 sent stays as it was
    assert (received[2].event.trace_id, received[2].event.func_name) == ("run2", "g")
    assert received[2].event is not event
    assert received[2].event == event
    assert (received[0].event.trace_id, received[0].event.func_name) == ("run1", "f")
    with pytest.raises(AttributeError):  # still frozen for everyone else
        received[0].event.trace_id = "x"  # type: ignore[misc]
    tool_event = CustomEvent("tick", 1, tool_name="t", tool_call_id="c")
    await first.custom(tool_event)  # a tool's own object is copied, never written to
    assert (tool_event.trace_id, received[3].event.trace_id) == ("", "run1")
    assert [i.origin.seq for i in received] == [1, 2, 1, 3]


async def test_pump_sending_stays_a_cancellation_point() -> None:
    reached: list[str] = []

    async def body(send: Any) -> str:
        await send("first")  # into the buffer at once
        with anyio.CancelScope() as scope:
            scope.cancel()
            await send("never")  # room in the buffer, but a cancellation is pending
            reached.append("past the send")
        return "end"

    with anyio.fail_after(GUARD):
        async with aclosing(event_pump(body)) as items:
            received = [item async for item in items]
    assert received == ["first", Finished("end")]
    assert reached == []


async def test_pump_unwrapped_yields_the_value_last_and_reraises_failures() -> None:
    async def body(send: Any) -> str:
        await send("a")
        await send("b")
        return "end"

    async def failing(send: Any) -> str:
        await send("a")
        raise ValueError("boom")

    with anyio.fail_after(GUARD):
        async with aclosing(event_pump(body, unwrap=True)) as items:
            received = [item async for item in items]
        assert received == ["a", "b", "end"]
        got: list[Any] = []

        async def consume() -> None:
            async with aclosing(event_pump(failing, unwrap=True)) as items:
                async for item in items:
                    got.append(item)

        with pytest.raises(ValueError, match="boom"):
            await consume()
    assert got == ["a"]


async def test_a_started_pump_outlives_a_reader_that_leaves() -> None:
    """``start_pump`` runs the body in the owner's task group: a reader that leaves does not
    cancel it; ``on_leave`` returning True keeps the stream for a second reader, which goes on
    where the first stopped; without it the stream closes and the body's sends fail quietly
    past the end. A failure is re-raised in the reader."""
    gate = anyio.Event()
    ended: list[str] = []

    async def body(send: Any) -> str:
        await send("a")
        await gate.wait()
        await send("b")
        ended.append("kept")
        return "end"

    async def dropped(send: Any) -> None:
        await send("x")
        await gate.wait()
        try:
            await send("y")
        except anyio.BrokenResourceError:
            ended.append("went on without a reader")

    async def failing(send: Any) -> None:
        raise ValueError("boom")

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as owner:
            kept = start_pump(body, owner)
            async with aclosing(pump_items(kept, on_leave=lambda: True)) as items:
                assert await anext(items) == "a"
            closed = start_pump(dropped, owner)
            async with aclosing(pump_items(closed, on_leave=lambda: False)) as items:
                assert await anext(items) == "x"
            gate.set()
            assert [item async for item in pump_items(kept)] == ["b"]
            with pytest.raises(ValueError, match="boom"):
                [item async for item in pump_items(start_pump(failing, owner))]
    assert sorted(ended) == ["kept", "went on without a reader"]


async def test_a_tap_sees_every_event_once_through_any_sink(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """``Emitter.tap``: an observer of a run someone else drives (a trace recorder under a
    session store) sees each event before the sink, once, and survives ``connect``; text and
    raw items are not events and pass it by."""
    server.script(
        Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="t1")),
        Reply.text("3", chunks=2),
    )

    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @llm_chat(llm, toolkit=[add], stream=True)
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """Help."""

    seen: list[Any] = []
    sunk: list[Any] = []

    async def observe(item: Any) -> None:
        assert not sunk or sunk[-1] is not item  # the tap goes first
        seen.append(item)

    async def sink(item: Any) -> None:
        sunk.append(item)

    run = await helper.run("add", history=[])
    run.context.emitter.tap(observe)
    run.context.emitter.connect(sink)  # a driver's own sink (the session store's)
    with anyio.fail_after(GUARD):
        await run.run_to_end()
    events = [item for item in sunk if isinstance(item, EventYield)]
    assert seen == events
    assert len({id(item) for item in seen}) == len(seen)
    assert isinstance(seen[-1].event, ReactEndEvent)
    assert run.state.result().text == "3"
