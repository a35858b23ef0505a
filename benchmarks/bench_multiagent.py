"""Multi-agent overhead: a handoff and an agent used as a tool vs calling the agents directly,
and a 4-agent group chat of 20 rounds, against the mock server (in a process of its own).

Floors, measured in the same run with the same number of LLM calls over the same server:

* agent as tool: the caller's tool is a plain ``@tool`` that calls the agent directly
  (``async for ... in researcher(task)``) vs ``researcher.as_tool()`` (3 LLM calls each);
* handoff: the same by hand — ``triage`` with a plain ``transfer_to_billing`` tool that pauses
  its run, then ``billing.resume(history + note)`` — vs ``Handoff(triage, {triage: [billing]})``
  (2 LLM calls and 1 tool call each);
* group chat: 20 direct calls, each agent continuing its own history with the chat's new
  messages, vs a 4-agent ``GroupChat`` of 20 rounds.

Like with like: before timing, each floor and its multi-agent variant run once against an
in-process mock server answering like the benchmark's; the number of LLM requests, the messages
in each and the request bytes are printed, and the benchmark stops if the requests or message
counts differ.

Client CPU is this process's CPU time (the server's is not counted), the best of 5 blocks,
floor and variant blocks alternating. Target: ≤ 1.1× the floor.

Run: ``python benchmarks/bench_multiagent.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from _common import MockServerProcess, fmt, measure, print_table

from simplellmfunc import OpenAICompatible, PauseSignal, llm_chat, tool
from simplellmfunc.runtime.multiagent import GroupChat, Handoff
from simplellmfunc.testing import MockLLMServer
from simplellmfunc.testing.mock_server import parse_args, react_reply

REPEATS = 5
Body = Callable[[], Awaitable[Any]]
Pair = tuple[Body, Body]
"""A floor and the multi-agent variant doing the same LLM calls."""

TOOL_ARGS = ["--react-steps", "2", "--only-with-tools"]
AS_TOOL_SERVER = [*TOOL_ARGS, "--tool-name", "researcher", "--tool-args", '{"task": "q"}']
HANDOFF_SERVER = [*TOOL_ARGS, "--tool-name", "transfer_to_billing"]
GROUP_SERVER = ["--reply-text", "I agree, and one more point."]


def agent(llm: OpenAICompatible, name: str, toolkit: list[Any] | None = None) -> Any:
    async def fn(message: str, history: list[dict[str, Any]] | None = None) -> None:
        pass

    fn.__name__ = name
    fn.__doc__ = f"You are {name}."
    return llm_chat(llm, toolkit=toolkit)(fn)


async def drain(chat: Any, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    async for item in chat(*args, **kwargs):
        history = item[1]
    return history


async def best_cpu(pair: Pair, iterations: int) -> tuple[float, float]:
    """The lowest CPU seconds per iteration of the floor and of the variant over REPEATS
    blocks each (after warm-up blocks), the blocks alternating so that a change of the
    machine's load weighs on both alike."""
    for body in pair * 3:
        await body()
    best = [float("inf"), float("inf")]
    for _ in range(REPEATS):
        for index, body in enumerate(pair):
            with measure() as m:
                for _ in range(iterations):
                    await body()
            best[index] = min(best[index], m.cpu / iterations)
    return best[0], best[1]


def as_tool_pair(llm: OpenAICompatible) -> Pair:
    researcher = agent(llm, "researcher")

    @tool
    async def researcher_direct(task: str) -> str:
        """You are researcher.

        Args:
            task: The task for the agent, in full.
        """
        history = await drain(researcher, task)
        return str(history[-1]["content"])

    researcher_direct.name = "researcher"
    direct_boss = agent(llm, "boss", [researcher_direct])
    tool_boss = agent(llm, "boss", [researcher.as_tool()])
    return (lambda: drain(direct_boss, "q")), (lambda: drain(tool_boss, "q"))


def handoff_pair(llm: OpenAICompatible) -> Pair:
    triage, billing = agent(llm, "triage"), agent(llm, "billing")
    signal: list[PauseSignal] = [PauseSignal()]

    @tool
    async def transfer_to_billing(reason: str = "") -> str:
        """Hand the conversation over to the agent 'billing' (You are billing.); it answers the
        user from here on.

        Args:
            reason: Why, in one sentence, for the next agent.
        """
        signal[0].pause()
        return "Transferred to billing."

    by_hand = agent(llm, "triage", [transfer_to_billing])
    note = {"role": "user", "content": "[handoff] triage handed the conversation to you (billing)."}

    async def direct() -> None:
        signal[0] = PauseSignal()
        history = await drain(by_hand, "refund?", _pause_signal=signal[0])
        async for _item in billing.resume([*history, note]):
            pass

    team = Handoff(triage, {triage: [billing]})

    async def handed() -> None:
        await team.run("refund?")

    return direct, handed


def group_pair(llm: OpenAICompatible, rounds: int) -> Pair:
    members = [agent(llm, f"a{i}") for i in range(4)]
    chat = GroupChat(members, max_rounds=rounds, stop_keywords=())

    async def direct() -> None:
        # Each agent continues its own history; its new message holds what the others said.
        histories: list[list[dict[str, Any]]] = [[] for _ in members]
        unheard: list[list[str]] = [["[user]: discuss"] for _ in members]
        for n in range(rounds):
            me = n % 4
            heard = "\n\n".join(unheard[me])
            prompt = f"{heard}\n\n[you are a{me}; it is your turn]"
            histories[me] = await drain(members[me], prompt, history=histories[me])
            histories[me][-2] = {"role": "user", "content": heard}  # as the chat keeps it
            said = f"[a{me}]: {histories[me][-1]['content']}"
            unheard[me] = []
            for other in range(4):
                if other != me:
                    unheard[other].append(said)

    async def grouped() -> None:
        result = await chat.run("discuss")
        assert result.rounds == rounds

    return direct, grouped


async def wire_row(label: str, server_args: Sequence[str], make: Callable[[Any], Pair]) -> str:
    """Run the pair once each on an in-process server answering like the benchmark's; check
    they send the same requests (count and messages per request)."""
    shapes = []
    reply = react_reply(parse_args(server_args))
    async with (
        MockLLMServer(default=reply) as server,
        OpenAICompatible("sk-bench", "mock", server.url) as llm,
    ):
        for body in make(llm):
            server.reset()
            await body()
            requests = server.requests
            counts = [len(r.json["messages"]) for r in requests]
            shapes.append((len(requests), counts, sum(r.body_bytes_len for r in requests)))
    (floor_n, floor_counts, floor_bytes), (cost_n, cost_counts, cost_bytes) = shapes
    if (floor_n, floor_counts) != (cost_n, cost_counts):
        raise SystemExit(f"{label}: not like with like: floor {shapes[0]}, variant {shapes[1]}")
    return (
        f"{label}: both send {floor_n} LLM requests of {sum(floor_counts)} messages "
        f"({floor_bytes} vs {cost_bytes} request bytes)"
    )


async def rows_of(label: str, url: str, make: Callable[[Any], Pair], iterations: int) -> list[Any]:
    async with OpenAICompatible("sk-bench", "mock", url) as llm:
        floor, cost = await best_cpu(make(llm), iterations)
    return [label, fmt(floor * 1e3), fmt(cost * 1e3), fmt(cost / floor)]


async def main(iterations: int, rounds: int) -> None:
    def group(llm: Any) -> Pair:
        return group_pair(llm, rounds)

    cases: list[tuple[str, list[str], Callable[[Any], Pair], int]] = [
        ("agent as tool (3 LLM calls)", AS_TOOL_SERVER, as_tool_pair, iterations),
        ("handoff (2 LLM calls)", HANDOFF_SERVER, handoff_pair, iterations),
        (f"group chat, 4 agents × {rounds} rounds", GROUP_SERVER, group, 1),
    ]
    checks = [await wire_row(label, args, make) for label, args, make, _ in cases]
    rows: list[list[Any]] = []
    for label, args, make, count in cases:
        with MockServerProcess(args) as server:
            rows.append(await rows_of(label, server.url, make, count))
    headers = ["variant", "floor ms CPU", "multi-agent ms CPU", "ratio (target ≤ 1.1)"]
    print_table(headers, rows, title="Multi-agent client CPU per run, vs direct calls")
    print("Like with like (one run of each against an in-process mock server):")
    for line in checks:
        print(f"  {line}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    anyio.run(main, options.iterations, options.rounds)
