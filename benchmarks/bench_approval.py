"""What the approval check costs on the hot path: CPU per tool call with and without a policy.

Three variants over the same scripted runs (``ScriptedLLM``: no sockets, so the engine's own
cost is what is measured): each run is one batch of ``--batch`` calls of a trivial async tool,
then a final answer.

- ``none``: no policy (the shipped default);
- ``pass-all``: a policy that sees every call and lets it run (the check on the hot path);
- ``ask-approve``: a policy that asks for every call and an approver that approves it (the
  whole wait: request event, answer, resolved event), for information;
- ``none-again``: ``none`` measured a second time, the noise floor of the figure.

One agent serves every variant; the policy is given per call (``_approval=``), so the variants
differ in nothing else. The check alone is also timed in isolation (``needs_gate`` +
``approval_reason`` over one call, no run around it).

Variants run in many short interleaved rounds in one process (each takes each place in
the order); the best round of each is kept (CPU seconds
from ``time.process_time``), which filters out noise from other processes. Target (issue 32):
``pass-all`` <= 1.02x ``none`` per tool call.

Usage::

    python benchmarks/bench_approval.py [--rounds 30] [--runs 20] [--batch 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import Any

import anyio

from simplellmfunc import ApprovalDecision, llm_chat, tool
from simplellmfunc.events import ApprovalRequestEvent
from simplellmfunc.testing import ScriptedLLM, ToolCallSpec
from simplellmfunc.tools import Tool

TARGET = 1.02


@tool
async def echo(x: int) -> int:
    """Return x."""
    return x


def _pass_all(_tool: Tool, _arguments: Mapping[str, Any]) -> None:
    return None


def _ask_all(_tool: Tool, _arguments: Mapping[str, Any]) -> bool:
    return True


def _approve(_request: ApprovalRequestEvent) -> ApprovalDecision:
    return ApprovalDecision.approve()


def _agent(batch: int) -> Any:
    calls = [ToolCallSpec("echo", {"x": i}, id=f"c{i}") for i in range(batch)]

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            return "done"
        return ScriptedLLM.response(tool_calls=calls)

    @llm_chat(ScriptedLLM(default=reply), toolkit=[echo])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You echo."""

    return agent


VARIANTS: dict[str, dict[str, Any]] = {
    "none": {},
    "pass-all": {"_approval": _pass_all},
    "ask-approve": {"_approval": _ask_all, "_approver": _approve},
    "none-again": {},  # the noise floor: the same variant as "none", measured separately
}


async def _measure(agent: Any, runs: int, kwargs: dict[str, Any]) -> float:
    started = time.process_time()
    for _ in range(runs):
        async for _item in agent("go", history=[], **kwargs):
            pass
    return time.process_time() - started


def _gate_cost(samples: int = 200_000) -> float:
    """Seconds one pass-all check takes in isolation (``needs_gate`` + ``approval_reason``)."""
    from simplellmfunc._transcript import Transcript
    from simplellmfunc.engine import EngineOptions, Invocation, Run
    from simplellmfunc.engine._gate import approval_reason, needs_gate

    invocation = Invocation(ScriptedLLM(), tools=(echo,), options=EngineOptions(approval=_pass_all))
    context = Run(invocation, Transcript([])).context
    arguments = {"x": 1}
    started = time.process_time()
    for _ in range(samples):
        if needs_gate(context, echo) and approval_reason(context, echo, arguments):
            raise AssertionError("pass-all asked")
    return (time.process_time() - started) / samples


async def main(rounds: int, runs: int, batch: int) -> None:
    variants = tuple(VARIANTS)
    agent = _agent(batch)  # one agent: the variants differ only by the call's policy
    for variant in variants:  # warm up
        await _measure(agent, max(1, runs // 10), VARIANTS[variant])
    best = dict.fromkeys(variants, float("inf"))
    for round_ in range(rounds):
        shift = round_ % len(variants)  # each variant takes each place in the order
        for variant in variants[shift:] + variants[:shift]:
            best[variant] = min(best[variant], await _measure(agent, runs, VARIANTS[variant]))
    calls = runs * batch
    print(f"{runs} runs x {batch} tool calls, best of {rounds} rounds (CPU per tool call)")
    for variant in variants:
        ratio = best[variant] / best["none"]
        print(f"  {variant:12s} {best[variant] / calls * 1e6:8.1f} us   {ratio:.3f}x")
    cost = _gate_cost()
    base = best["none"] / calls
    print(f"the pass-all check alone: {cost * 1e6:.2f} us per call = {(base + cost) / base:.4f}x")
    ratio = best["pass-all"] / best["none"]
    verdict = "ok" if ratio <= TARGET else "OVER"
    print(f"pass-all / none = {ratio:.3f}x (target <= {TARGET}x): {verdict}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batch", type=int, default=5)
    args = parser.parse_args()
    anyio.run(main, args.rounds, args.runs, args.batch)
