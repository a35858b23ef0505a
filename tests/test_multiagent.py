"""Multi-agent collaboration: agent as tool, handoff, group chat, parallel, channels and shared
memory (in-process; Redis ones in ``test_multiagent_redis.py``).

Agents are real ``@llm_chat`` agents over ``ScriptedLLM`` (deterministic replies, recorded
requests) or over the loopback ``MockLLMServer`` (the wire).
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, OpenAICompatible, llm_chat
from simplellmfunc._messages import history_from_dicts, validate_history
from simplellmfunc.events import CustomEvent, EventYield, ReactEndEvent, ToolCallStartEvent
from simplellmfunc.exceptions import (
    ChannelClosedError,
    ChannelError,
    ChannelTimeoutError,
    ProviderError,
    SharedMemoryTypeError,
    TeamMemberError,
    UserError,
)
from simplellmfunc.providers import LLMRequest
from simplellmfunc.runtime.multiagent import (
    Channel,
    GroupChat,
    GroupChatState,
    Handoff,
    LLMSelector,
    Parallel,
    SharedMemory,
    drop_tool_turns,
)
from simplellmfunc.testing import MockLLMServer, Reply, ScriptedLLM, ToolCallSpec

GUARD = 10.0


def chat_agent(llm: Any, name: str, doc: str = "", **options: Any) -> Any:
    """An ``@llm_chat`` agent called ``name`` with ``doc`` as its system prompt."""

    async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
        pass

    agent.__name__ = agent.__qualname__ = name
    agent.__doc__ = doc or f"You are {name}."
    return llm_chat(llm, **options)(agent)


def call(name: str, **arguments: Any) -> Any:
    return ScriptedLLM.response(tool_calls=[ToolCallSpec(name, arguments)])


def assert_valid(history: list[dict[str, Any]]) -> None:
    validate_history(history_from_dicts(history))


async def collect(stream: Any) -> tuple[list[EventYield], Any]:
    events, last = [], None
    with anyio.fail_after(GUARD):
        async for item in stream:
            if isinstance(item, EventYield):
                events.append(item)
            else:
                last = item
    return events, last


# -- agent as tool ----------------------------------------------------------------------------


async def test_agent_as_tool_streams_tagged_events_and_adds_usage() -> None:
    researcher = chat_agent(ScriptedLLM(["Paris."]), "researcher", "You find facts.")
    boss_llm = ScriptedLLM([call("ask_researcher", task="capital of France?"), "It is Paris."])
    boss = chat_agent(
        boss_llm, "boss", toolkit=[researcher.as_tool("ask_researcher")], enable_event=True
    )
    items = [item async for item in boss("capital?")]
    events = [i for i in items if isinstance(i, EventYield)]
    inner = [e for e in events if e.origin.agent == "ask_researcher"]
    assert type(inner[0].event).__name__ == "ReactStartEvent"
    assert {e.origin.fork_depth for e in inner} == {1}
    outer_id = events[0].origin.agent_call_id
    assert {e.origin.parent_call_id for e in inner} == {outer_id}
    (started,) = [e.event for e in events if isinstance(e.event, ToolCallStartEvent)]
    assert {e.origin.parent_tool_call_id for e in inner} == {started.tool_call_id}
    ends = [e.event for e in events if isinstance(e.event, ReactEndEvent)]
    child_end, parent_end = ends
    assert parent_end.total_usage.calls == 3  # two of the boss, one of the researcher
    assert parent_end.total_usage.total_tokens > child_end.total_usage.total_tokens
    response = items[-1]
    assert response.response == "It is Paris."
    assert response.messages[3] == {
        "role": "tool",
        "tool_call_id": response.messages[2]["tool_calls"][0]["id"],
        "content": "Paris.",
    }
    tool = researcher.as_tool("ask_researcher", "Ask the researcher.")
    assert tool.spec().parameters["required"] == ["task"]
    assert tool.description == "Ask the researcher."


async def test_agent_tool_outside_a_run_runs_the_agent() -> None:
    researcher = chat_agent(ScriptedLLM(["42"]), "researcher", "You answer.\nMore text.")
    tool = researcher.as_tool()
    assert tool.name == "researcher"
    assert tool.description == "You answer."
    assert await tool.run("what?") == "42"
    with pytest.raises(UserError, match="not an @llm_chat agent"):
        Handoff(chat_agent, {})  # a plain function is no agent


async def test_agent_as_tool_is_aborted_with_its_caller() -> None:
    slow = chat_agent(ScriptedLLM(["never"], delay=30), "slow")
    boss = chat_agent(ScriptedLLM([call("slow", task="wait")]), "boss", toolkit=[slow.as_tool()])
    abort = AbortSignal()
    history: list[dict[str, Any]] = []

    async def consume() -> None:
        nonlocal history
        async for item in boss("go", _abort_signal=abort):
            history = item[1]

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(consume)
            await anyio.sleep(0.2)
            abort.abort("user stop")
    assert history[-1]["role"] == "tool"  # the tool call is answered: the history stays valid
    assert "user stop" in history[-1]["content"]
    assert_valid(history)


# -- handoff ----------------------------------------------------------------------------------


def billing_team() -> tuple[Any, Any, ScriptedLLM]:
    llm = ScriptedLLM([call("transfer_to_billing", reason="a refund"), "Refund issued."])
    triage = chat_agent(llm, "triage", "You route customers.")
    billing = chat_agent(llm, "billing", "You handle billing.")
    return triage, billing, llm


async def test_handoff_continues_with_a_valid_history_and_reports_the_agent() -> None:
    triage, billing, llm = billing_team()
    result = await Handoff(triage, {triage: [billing], billing: [triage]}).run("refund please")
    assert (result.text, result.agent, result.path) == (
        "Refund issued.",
        "billing",
        ("triage", "billing"),
    )
    assert result.history[0] == {"role": "system", "content": "You handle billing."}
    assert_valid(result.history)
    assert result.usage.calls == 2
    first, second = llm.requests
    assert [t.name for t in first.tools] == ["transfer_to_billing"]
    assert [t.name for t in second.tools] == ["transfer_to_triage"]
    assert second.messages[0].content == "You handle billing."
    assert (
        second.messages[-1].content
        == "[handoff] triage handed the conversation to you (billing): a refund"
    )


async def test_handoff_goes_on_after_a_history_with_the_agent_that_answered() -> None:
    triage, billing, llm = billing_team()
    team = Handoff(triage, {triage: [billing], billing: [triage]})
    first = await team.run("refund please")
    assert first.history[-1] == {
        "role": "assistant",
        "content": "Refund issued.",
        "name": "billing",
    }
    llm.script("It is on its way.")
    second = await team.run("when?", history=first.history)
    assert (second.text, second.agent, second.path) == (
        "It is on its way.",
        "billing",
        ("billing",),
    )
    sent = llm.requests[-1].messages
    assert (sent[0].content, sent[-1].content) == ("You handle billing.", "when?")
    assert_valid(second.history)
    assert len(second.history) == len(first.history) + 2
    llm.script("Hello.")  # an unnamed answer (or none): the entry agent goes on
    third = await team.run("hi", history=[{"role": "user", "content": "x"}])
    assert third.path == ("triage",)


async def test_handoff_input_filter_and_events_in_one_stream() -> None:
    triage, billing, llm = billing_team()
    team = Handoff(triage, {triage: [billing]}, input_filter=drop_tool_turns)
    events, result = await collect(team.stream("refund please"))
    assert result.agent == "billing"
    roles = [m.role for m in llm.requests[1].messages]
    assert roles == ["system", "user", "user"]  # the transfer call and its result filtered out
    handoffs = [e.event for e in events if isinstance(e.event, CustomEvent)]
    assert [h.data for h in handoffs] == [{"from": "triage", "to": "billing", "reason": "a refund"}]
    agents = [e.origin.agent for e in events if isinstance(e.event, ReactEndEvent)]
    assert agents == ["triage", "billing"]


async def test_handoff_loops_are_bounded() -> None:
    # Both agents always hand over: after max_handoffs the one in charge has no transfer tool.
    def reply(request: LLMRequest) -> Any:
        return call(request.tools[0].name) if request.tools else "I answer myself."

    llm = ScriptedLLM(default=reply)
    ping = chat_agent(llm, "ping")
    pong = chat_agent(llm, "pong")
    result = await Handoff(ping, {ping: [pong], pong: [ping]}, max_handoffs=3).run("go")
    assert result.path == ("ping", "pong", "ping", "pong")
    assert result.text == "I answer myself."
    assert len(llm.requests) == 4
    assert_valid(result.history)


# -- group chat -------------------------------------------------------------------------------


async def test_group_chat_round_robin_turn_order_and_keyword() -> None:
    llm = ScriptedLLM(["idea 1", "critique 1", "idea 2", "TERMINATE: good"])
    writer = chat_agent(llm, "writer")
    critic = chat_agent(llm, "critic")
    chat = GroupChat([writer, critic], max_rounds=10)
    events, result = await collect(chat.stream("write a slogan"))
    assert [(m.speaker, m.text) for m in result.messages] == [
        ("user", "write a slogan"),
        ("writer", "idea 1"),
        ("critic", "critique 1"),
        ("writer", "idea 2"),
        ("critic", "TERMINATE: good"),
    ]
    assert (result.rounds, result.terminated_by) == (4, "keyword")
    starts = [e.origin.agent for e in events if type(e.event).__name__ == "ReactStartEvent"]
    assert starts == ["writer", "critic", "writer", "critic"]
    # The writer's second turn: its own message as an assistant turn, the critic's as user text.
    third = llm.requests[2].messages
    assert [m.role for m in third] == ["system", "user", "assistant", "user"]
    assert third[2].content == "idea 1"
    assert third[3].content.startswith("[critic]: critique 1")
    for request in llm.requests:
        validate_history(request.messages)


async def test_group_chat_goes_on_after_a_history() -> None:
    llm = ScriptedLLM(["idea 1", "critique 1", "idea 2", "critique 2"])
    writer, critic = chat_agent(llm, "writer"), chat_agent(llm, "critic")
    chat = GroupChat([writer, critic], max_rounds=2)
    first = await chat.run("write a slogan")
    assert first.history == [
        {"role": "user", "content": "write a slogan"},
        {"role": "assistant", "name": "writer", "content": "idea 1"},
        {"role": "assistant", "name": "critic", "content": "critique 1"},
    ]
    second = await chat.run("shorter", history=first.history)
    speakers = [m.speaker for m in second.messages]
    assert speakers == ["user", "writer", "critic", "user", "writer", "critic"]
    assert (second.rounds, second.text) == (2, "critique 2")  # max_rounds counts this run's
    sent = llm.requests[2].messages  # the writer sees its own turn and what came since
    assert [m.role for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[3].content.startswith("[critic]: critique 1\n\n[user]: shorter")


async def test_group_chat_selector_function_predicate_and_max_rounds() -> None:
    llm = ScriptedLLM(default="ok")
    a, b, c = (chat_agent(llm, n) for n in "abc")

    def last_two(state: GroupChatState) -> str:
        return "c" if state.round % 2 == 0 else "a"

    result = await GroupChat([a, b, c], speaker=last_two, max_rounds=3).run("go")
    assert [m.speaker for m in result.messages] == ["user", "c", "a", "c"]
    assert result.terminated_by == "max_rounds"
    stop = GroupChat([a, b, c], until=lambda s: s.round == 2, stop_keywords=())
    result = await stop.run("go")
    assert (result.rounds, result.terminated_by) == (2, "predicate")
    with pytest.raises(UserError, match="chose 'z'"):
        await GroupChat([a, b], speaker=lambda s: "z").run("go")


async def test_group_chat_llm_selector() -> None:
    agents_llm = ScriptedLLM(["from bob", "from alice TERMINATE"])
    alice = chat_agent(agents_llm, "alice", "Writes the drafts.\n\nIn short sentences.")
    bob = chat_agent(agents_llm, "bob")
    chooser = ScriptedLLM(["Bob should speak.", "nobody"])
    selector = LLMSelector(chooser, {"bob": "reviews"})
    result = await GroupChat([alice, bob], speaker=selector).run("go")
    assert [m.speaker for m in result.messages] == ["user", "bob", "alice"]  # then round robin
    roster = chooser.requests[0].messages[0].content
    assert "- bob: reviews" in roster
    assert "- alice: Writes the drafts.\n" in roster  # its docstring's first line
    assert selector.usage.calls == 2


async def test_group_chat_member_failure_is_typed_and_keeps_the_chat() -> None:
    writer = chat_agent(ScriptedLLM(["idea 1"]), "writer")
    critic = chat_agent(ScriptedLLM([KeyError("choices")]), "critic")  # a bug in its model
    with pytest.raises(TeamMemberError, match="agent 'critic' failed: KeyError") as caught:
        await GroupChat([writer, critic]).run("write a slogan")
    error = caught.value
    assert error.agent == "critic"
    assert isinstance(error.__cause__, KeyError)
    assert error.history == [
        {"role": "user", "content": "write a slogan"},
        {"role": "assistant", "name": "writer", "content": "idea 1"},
    ]
    assert error.usage.calls == 1  # the writer's call; the critic's failed before any usage
    fixed = [chat_agent(ScriptedLLM(["ok"]), n) for n in ("writer", "critic")]
    again = GroupChat(fixed, max_rounds=1)
    resumed = await again.run("go on", history=error.history)  # the chat so far is usable
    assert [m.speaker for m in resumed.messages] == ["user", "writer", "user", "writer"]


async def test_group_chat_random_speaker_and_the_seeds_stop_words() -> None:
    llm = ScriptedLLM(["one", "two", "three DONE"])
    a, b, c = (chat_agent(llm, n) for n in "abc")
    result = await GroupChat([a, b, c], speaker="random").run("go")
    speakers = [m.speaker for m in result.messages[1:]]
    assert all(x != y for x, y in itertools.pairwise(speakers))  # no one twice in a row
    assert (result.rounds, result.terminated_by) == (3, "keyword")  # "DONE" is a stop word
    with pytest.raises(UserError, match="speaker must be one of"):
        GroupChat([a, b], speaker="shuffle")  # type: ignore[arg-type]


async def test_handoff_graph_changes_at_run_time_with_fuzzy_names_and_a_fallback() -> None:
    llm = ScriptedLLM(
        [call("transfer_to_refunds", reason="money back"), "Refunded.", "Still refunds?", "Hi."]
    )
    triage = chat_agent(llm, "triage", "You route requests.")
    helpdesk = chat_agent(llm, "helpdesk", "You help with anything.")
    team = Handoff(triage, {"Triage": []}, fallback=helpdesk)  # "Triage": matched ignoring case
    assert team.agents == ("triage", "helpdesk")
    refunds = chat_agent(llm, "refunds", "You handle refunds.")
    assert team.register(refunds, reachable_from=["triage"]) == "refunds"
    first = await team.run("my money back please")
    assert (first.agent, first.path, first.text) == ("refunds", ("triage", "refunds"), "Refunded.")
    assert team.resolve("Refunds") == "refunds"
    assert team.resolve("refnds") == "refunds"  # closest spelling
    assert team.resolve("billing") is None
    second = await team.run("and now?", history=first.history)  # the agent in charge goes on
    assert (second.agent, second.text) == ("refunds", "Still refunds?")
    team.unregister("refunds")
    assert "refunds" not in team.agents
    assert llm.requests[0].tools[0].name == "transfer_to_refunds"
    third = await team.run("hello?", history=second.history)  # "refunds" is gone: the fallback
    assert (third.agent, third.text) == ("helpdesk", "Hi.")
    with pytest.raises(UserError, match="entry or fallback"):
        team.unregister("triage")
    with pytest.raises(UserError, match="already has an agent named 'helpdesk'"):
        team.register(helpdesk)
    with pytest.raises(UserError, match="no agent 'nobody'"):
        team.register(refunds, reachable_from=["nobody"])


async def test_handoff_member_failure_is_typed_and_keeps_the_conversation() -> None:
    llm = ScriptedLLM([call("transfer_to_billing", reason="a refund"), RuntimeError("boom")])
    triage = chat_agent(llm, "triage", "You route requests.")
    billing = chat_agent(llm, "billing", "You handle billing.")
    with pytest.raises(TeamMemberError, match="agent 'billing' failed: RuntimeError") as caught:
        await Handoff(triage, {triage: [billing]}).run("refund please")
    error = caught.value
    assert error.agent == "billing"
    assert error.usage.calls == 1  # triage's transfer call
    assert_valid(error.history)
    assert error.history[1] == {"role": "user", "content": "refund please"}
    assert any(m.get("tool_calls") for m in error.history)  # the transfer is kept


async def test_parallel_counts_the_calls_of_a_member_that_failed() -> None:
    async def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        return "v"

    flaky = ScriptedLLM([call("lookup", key="k"), ProviderError("model down")])
    member = chat_agent(flaky, "flaky", toolkit=[lookup])
    result = await Parallel([member]).run("task")
    (outcome,) = result.outcomes
    assert outcome.error == "ProviderError: model down"
    assert outcome.usage.calls == 1  # billed before the failure; was 0


# -- parallel ---------------------------------------------------------------------------------


async def test_parallel_reports_a_failure_and_the_others_answer() -> None:
    good = chat_agent(ScriptedLLM(["fine"]), "good")
    bad = chat_agent(ScriptedLLM([ProviderError("model down")]), "bad")
    slow = chat_agent(ScriptedLLM(["late"], delay=30), "slow")
    team = Parallel([good, bad, slow], timeout=0.5)
    with anyio.fail_after(GUARD):
        result = await team.run("task")
    good_o, bad_o, slow_o = result.outcomes
    assert (good_o.text, good_o.ok) == ("fine", True)
    assert (bad_o.error, bad_o.terminated_by) == ("ProviderError: model down", "error")
    assert (slow_o.terminated_by, slow_o.ok) == ("timeout", False)
    assert result.failed == (bad_o, slow_o)


async def test_parallel_or_parallel_flattens() -> None:
    a, b, c = (chat_agent(ScriptedLLM([f"from {n}"]), n) for n in "abc")
    team = Parallel([a], timeout=5) | Parallel([b], timeout=9) | c
    assert [o.agent for o in (await team.run("go")).outcomes] == ["a", "b", "c"]
    assert (team.timeout, team.limit) == (None, None)  # c alone has no timeout
    assert (Parallel([a], timeout=5) | Parallel([b], timeout=9)).timeout == 9
    with pytest.raises(UserError, match="'a' is in both"):
        Parallel([a]) | Parallel([a])
    with pytest.raises(UserError, match="per-agent inputs"):
        Parallel([a], inputs=["x"]) | b


async def test_parallel_inputs_limit_and_abort() -> None:
    running, peak = 0, 0

    async def answer(request: LLMRequest) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.05)
        running -= 1
        return f"done {request.messages[-1].content}"

    class Counting(ScriptedLLM):
        async def complete(self, request: LLMRequest) -> Any:
            return ScriptedLLM.response(await answer(request))

    agents = {f"w{i}": chat_agent(Counting(), f"w{i}") for i in range(4)}
    team = Parallel(agents, inputs=["a", "b", "c", "d"], limit=2)
    result = await team.run()
    assert result.texts == ("done a", "done b", "done c", "done d")
    assert peak == 2
    slow = [chat_agent(ScriptedLLM(["x"], delay=30), f"s{i}") for i in range(3)]
    abort = AbortSignal()

    async def stop_soon() -> None:
        await anyio.sleep(0.2)
        abort.abort("stop")

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(stop_soon)
            outcome = await Parallel(slow).run("go", abort=abort)
    assert {o.terminated_by for o in outcome.outcomes} == {"aborted"}
    assert {len(o.input) for o in outcome.outcomes} == {2}
    with pytest.raises(UserError, match="4 inputs"):
        Parallel(agents, inputs=["a"])


# -- channels and shared memory ---------------------------------------------------------------


async def test_shared_memory_wrap_puts_the_memory_in_the_agents_context() -> None:
    memory = SharedMemory(namespace="team")
    await memory.set("draft", "v1")
    llm = ScriptedLLM(default="ok")
    plain = chat_agent(llm, "writer", "You write.")
    wrapped = memory.wrap(plain)
    assert wrapped is not plain
    assert wrapped.__name__ == "writer"
    async for _ in wrapped("go", history=[]):
        pass
    system = llm.requests[-1].messages[0].content
    assert system.startswith("You write.")
    assert "## Shared Memory" in system
    assert "- [draft] v1 (just now)" in system
    await memory.set("draft", "v2")  # another agent changed it: the next call sees it
    async for _ in wrapped("again", history=[]):
        pass
    assert "- [draft] v2" in llm.requests[-1].messages[0].content
    async for _ in plain("unwrapped", history=[]):
        pass
    assert "Shared Memory" not in llm.requests[-1].messages[0].content
    with pytest.raises(UserError, match="needs an @llm_chat agent"):
        memory.wrap(print)  # type: ignore[arg-type]


async def test_channel_send_receive_timeouts_and_close() -> None:
    async with Channel(int, capacity=1, name="numbers") as channel:
        with pytest.raises(ChannelTimeoutError, match="nothing received"):
            await channel.receive(timeout=0.05)
        await channel.send(1)
        with pytest.raises(ChannelTimeoutError, match="no room"):
            await channel.send(2, timeout=0.05)
        with pytest.raises(ChannelError, match="wrong type"):
            await channel.send("not a number")  # type: ignore[arg-type]
        assert await channel.receive(timeout=1) == 1
        await channel.send(3)
        await channel.close()
        with pytest.raises(ChannelClosedError):
            await channel.send(4)
        assert [v async for v in channel] == [3]
        with pytest.raises(ChannelClosedError):
            await channel.receive()
        # The seed's channel history: direction, message, time; failed operations not recorded.
        assert [(r.direction, r.message) for r in channel.history] == [
            ("send", 1),
            ("receive", 1),
            ("send", 3),
            ("receive", 3),
        ]
        times = [r.time for r in channel.history]
        assert times == sorted(times)
    small = Channel(int, capacity=5, history_size=2)
    for n in range(4):
        await small.send(n)
    assert [r.message for r in small.history] == [2, 3]  # bounded: the oldest go first


async def test_agents_talk_through_a_channel_and_share_memory() -> None:
    memory = SharedMemory(namespace="team")
    writer_llm = ScriptedLLM([call("shared_write", key="draft", value="v1"), "saved"])
    writer = chat_agent(writer_llm, "writer", toolkit=list(memory.tools()))
    reader_llm = ScriptedLLM([call("shared_read", key="draft"), "the draft is v1"])
    reader = chat_agent(reader_llm, "reader", toolkit=list(memory.tools()))
    channel: Channel[str] = Channel(str)

    async def produce() -> None:
        result = await Parallel([writer]).run("write")
        await channel.send(result.texts[0], timeout=GUARD)

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(produce)
            assert await channel.receive(timeout=GUARD) == "saved"
    answer = (await Parallel([reader]).run("read")).texts[0]
    assert answer == "the draft is v1"
    assert reader_llm.requests[1].messages[-1].content == "v1"
    assert await memory.snapshot() == {"draft": "v1"}
    assert await memory.namespace("other").keys() == []
    frozen = SharedMemory(memory.store, namespace="team", append_only=True)
    await frozen.set("draft", "v2")  # the seed's append-only: same type may be rewritten
    with pytest.raises(SharedMemoryTypeError, match="holds a string, not a object"):
        await frozen.set("draft", {"v": 3})
    with pytest.raises(UserError, match="append-only"):
        await frozen.delete("draft")
    assert await memory.get("draft") == "v2"


# -- at the wire ------------------------------------------------------------------------------


async def test_handoff_and_agent_tool_over_the_mock_server(mock_server: MockLLMServer) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("transfer_to_expert", {"reason": "hard"}, id="h1")),
        Reply.tool_calls(ToolCallSpec("helper", {"task": "look it up"}, id="t1")),
        Reply.text("looked up"),
        Reply.text("The expert answer."),
    )
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as llm:
        helper = chat_agent(llm, "helper")
        expert = chat_agent(llm, "expert", toolkit=[helper.as_tool()])
        front = chat_agent(llm, "front")
        events, result = await collect(Handoff(front, {front: [expert]}).stream("question"))
    assert (result.agent, result.text) == ("expert", "The expert answer.")
    assert_valid(result.history)
    depth = {(e.origin.agent, e.origin.fork_depth) for e in events}
    assert {("front", 1), ("expert", 1), ("helper", 2)} <= depth
    bodies = [r.json for r in mock_server.requests]
    assert [t["function"]["name"] for t in bodies[1]["tools"]] == ["helper"]
