"""Multi-agent overhead: a handoff and an agent used as a tool vs calling the agents directly,
and a 4-agent group chat of 20 rounds, against the mock server (in a process of its own).

Floors, measured in the same run with the same number of LLM calls over the same server:

* agent as tool: the caller's tool is a plain ``@tool`` that calls the agent directly
  (``async for ... in researcher(task)``) vs ``researcher.as_tool()`` (3 LLM calls each);
* handoff: the same by hand — ``triage`` with a plain ``transfer_to_billing`` tool that pauses
  its run, then ``billing.resume(history + note)`` — vs ``Handoff(triage, {triage: [billing]})``
  (2 LLM calls and 1 tool call each);
* group chat: 20 direct calls of one agent with a history growing like the chat's vs a
  4-agent ``GroupChat`` of 20 rounds.

Client CPU is this process's CPU time (the server's is not counted). Target: ≤ 1.1× the floor.

Run: ``python benchmarks/bench_multiagent.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from _common import MockServerProcess, fmt, measure, print_table

from simplellmfunc import OpenAICompatible, PauseSignal, llm_chat, tool
from simplellmfunc.runtime.multiagent import GroupChat, Handoff

REPEATS = 5


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


async def best_cpu(body: Callable[[], Awaitable[None]], iterations: int) -> float:
    """The lowest CPU seconds per iteration over REPEATS blocks (after one warm-up block)."""
    for _ in range(3):
        await body()
    best = float("inf")
    for _ in range(REPEATS):
        with measure() as m:
            for _ in range(iterations):
                await body()
        best = min(best, m.cpu / iterations)
    return best


async def as_tool_rows(url: str, iterations: int) -> list[list[Any]]:
    async with OpenAICompatible("sk-bench", "mock", url) as llm:
        researcher = agent(llm, "researcher")

        @tool
        async def researcher_direct(task: str) -> str:
            """Ask the researcher."""
            history = await drain(researcher, task)
            return str(history[-1]["content"])

        researcher_direct.name = "researcher"
        direct_boss = agent(llm, "boss", [researcher_direct])
        tool_boss = agent(llm, "boss", [researcher.as_tool()])
        floor = await best_cpu(lambda: drain(direct_boss, "q"), iterations)
        cost = await best_cpu(lambda: drain(tool_boss, "q"), iterations)
    return [["agent as tool (3 LLM calls)", fmt(floor * 1e3), fmt(cost * 1e3), fmt(cost / floor)]]


async def handoff_rows(url: str, iterations: int) -> list[list[Any]]:
    async with OpenAICompatible("sk-bench", "mock", url) as llm:
        triage, billing = agent(llm, "triage"), agent(llm, "billing")
        signal: list[PauseSignal] = [PauseSignal()]

        @tool
        async def transfer_to_billing(reason: str = "") -> str:
            """Hand the conversation over to billing."""
            signal[0].pause()
            return "Transferred to billing."

        by_hand = agent(llm, "triage", [transfer_to_billing])
        note = {"role": "user", "content": "[handoff] triage handed the conversation to you."}

        async def direct() -> None:
            signal[0] = PauseSignal()
            history = await drain(by_hand, "refund?", _pause_signal=signal[0])
            async for _item in billing.resume([*history, note]):
                pass

        team = Handoff(triage, {triage: [billing]})

        async def handed() -> None:
            await team.run("refund?")

        floor = await best_cpu(direct, iterations)
        cost = await best_cpu(handed, iterations)
    return [["handoff (2 LLM calls)", fmt(floor * 1e3), fmt(cost * 1e3), fmt(cost / floor)]]


async def group_rows(url: str, rounds: int) -> list[list[Any]]:
    async with OpenAICompatible("sk-bench", "mock", url) as llm:
        members = [agent(llm, f"a{i}") for i in range(4)]
        chat = GroupChat(members, max_rounds=rounds, stop_keywords=())

        async def direct() -> None:
            history: list[dict[str, Any]] = []
            for n in range(rounds):
                history = await drain(members[n % 4], f"turn {n}", history=history)

        async def grouped() -> None:
            result = await chat.run("discuss")
            assert result.rounds == rounds

        with measure() as wall:
            await grouped()
        floor = await best_cpu(direct, 1)
        cost = await best_cpu(grouped, 1)
    return [
        [
            f"group chat, 4 agents × {rounds} rounds",
            fmt(floor * 1e3),
            fmt(cost * 1e3),
            fmt(cost / floor),
        ],
        [
            f"  (one chat: {fmt(wall.wall * 1e3)} ms wall, "
            f"{fmt(cost / rounds * 1e3)} ms CPU/round)",
            "",
            "",
            "",
        ],
    ]


async def main(iterations: int, rounds: int) -> None:
    rows: list[list[Any]] = []
    tool_args = ["--react-steps", "2", "--only-with-tools"]
    with MockServerProcess(
        [*tool_args, "--tool-name", "researcher", "--tool-args", '{"task": "q"}']
    ) as server:
        rows += await as_tool_rows(server.url, iterations)
    with MockServerProcess([*tool_args, "--tool-name", "transfer_to_billing"]) as server:
        rows += await handoff_rows(server.url, iterations)
    with MockServerProcess(["--reply-text", "I agree, and one more point."]) as server:
        rows += await group_rows(server.url, rounds)
    headers = ["variant", "floor ms CPU", "multi-agent ms CPU", "ratio (target ≤ 1.1)"]
    print_table(headers, rows, title="Multi-agent client CPU per run, vs direct calls")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=20)
    options = parser.parse_args()
    anyio.run(main, options.iterations, options.rounds)
