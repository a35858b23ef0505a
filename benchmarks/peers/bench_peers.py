"""Peer columns: the same 3-step ReAct session and 8-parallel-tools turn in other frameworks.

Client CPU per session against the loopback mock server (its own process, pinned to the other
core), as a ratio to the hand-written httpx floor measured in the same run; floor, ours and each
peer alternate over the rounds (median reported). Each peer runs in its own benchmark-only venv
(``make bench-peers`` builds them from ``requirements*.txt`` beside this file); a peer whose
venv is missing is reported as such, not guessed.

Usage::

    python benchmarks/peers/bench_peers.py [--runs 100] [--rounds 3] [--out peers.json]
    python benchmarks/peers/bench_peers.py --child IMPL SCENARIO URL RUNS   # one measurement
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PEER_VENV = ROOT / ".cache" / "peers" / "venv"
PEER_VENV_312 = ROOT / ".cache" / "peers" / "venv312"
KEY = "sk-bench-0123456789"
SYSTEM = "You help."
USER = "Do the work, then answer."
ANSWER = "ok"  # the mock server's final reply (its default --reply-text)
SCENARIOS = {
    "react": ("--react-steps", "3", "--tool-name", "noop"),
    "parallel": ("--react-steps", "2", "--tool-name", "noop", "--parallel", "8"),
}
#: impl → the interpreter that runs it (``None``: this one).
PEERS = {
    "pydantic-ai": PEER_VENV / "bin" / "python",
    "openai-agents": PEER_VENV / "bin" / "python",
    "SimpleLLMFunc 0.7.8": PEER_VENV_312 / "bin" / "python",
}


# -- the clients (each imported only in its own child) ---------------------------------------


def _floor(url: str) -> Any:
    import httpx

    client = httpx.AsyncClient(
        base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=120
    )
    tools = [
        {
            "type": "function",
            "function": {
                "name": "noop",
                "description": "",
                "parameters": {"type": "object", "properties": {}},
            },
        }
    ]

    async def noop() -> str:
        return "done"

    async def turn() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER},
        ]
        while True:
            body = {"model": "bench", "messages": messages, "tools": tools}
            r = await client.post("/chat/completions", content=json.dumps(body))
            r.raise_for_status()
            message = json.loads(r.content)["choices"][0]["message"]
            calls = message.get("tool_calls") or []
            messages.append(
                {"role": "assistant", "content": message["content"], "tool_calls": calls}
            )
            if not calls:
                return str(message["content"])
            results = await asyncio.gather(*(noop() for _ in calls))
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": text}
                for c, text in zip(calls, results, strict=True)
            ]

    return turn


def _ours(url: str) -> Any:
    from simplellmfunc import OpenAICompatible, llm_chat, tool

    llm = OpenAICompatible(KEY, "bench", url, max_retries=0)

    @tool(name="noop")
    async def noop() -> str:
        """Do the work."""
        return "done"

    @llm_chat(llm, toolkit=[noop])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You help."""

    async def turn() -> str:
        outputs = [text async for text, _ in agent(USER, history=[])]
        return str(outputs[-1])

    return turn


def _pydantic_ai(url: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=url, api_key=KEY))
    agent = Agent(model, system_prompt=SYSTEM)

    @agent.tool_plain
    async def noop() -> str:
        """Do the work."""
        return "done"

    async def turn() -> str:
        return str((await agent.run(USER)).output)

    return turn


def _openai_agents(url: str) -> Any:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=url, api_key=KEY, max_retries=0)

    @function_tool
    async def noop() -> str:
        """Do the work."""
        return "done"

    model = OpenAIChatCompletionsModel(model="bench", openai_client=client)
    agent = Agent(name="bench", instructions=SYSTEM, tools=[noop], model=model)

    async def turn() -> str:
        return str((await Runner.run(agent, USER)).final_output)

    return turn


def _simplellmfunc_078(url: str) -> Any:
    from SimpleLLMFunc import APIKeyPool, OpenAICompatible, llm_chat, tool

    pool = APIKeyPool([KEY], "bench")
    llm = OpenAICompatible(
        pool,
        "bench",
        url,
        max_retries=0,
        rate_limit_capacity=10**9,
        rate_limit_refill_rate=1e9,
    )

    @tool(name="noop", description="Do the work.")
    async def noop() -> str:
        """Do the work."""
        return "done"

    @llm_chat(llm_interface=llm, toolkit=[noop])
    async def agent(message: str, history: list[dict[str, Any]] | None = None):  # type: ignore[no-untyped-def]
        """You help."""

    async def turn() -> str:
        outputs = [item async for item in agent(USER, history=[])]
        return str(outputs[-1][0])

    return turn


CLIENTS = {
    "floor": _floor,
    "ours": _ours,
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
    "SimpleLLMFunc 0.7.8": _simplellmfunc_078,
}


async def _child(impl: str, url: str, runs: int) -> dict[str, float]:
    turn = CLIENTS[impl](url)
    answer = await turn()
    if answer != ANSWER:  # a client that did not run the session as scripted is not measured
        raise SystemExit(f"{impl} answered {answer[:80]!r}, not the scripted {ANSWER!r}")
    for _ in range(max(runs // 10, 10)):
        await turn()
    cpu = time.process_time()
    for _ in range(runs):
        await turn()
    return {"cpu": (time.process_time() - cpu) / runs}


# -- the parent --------------------------------------------------------------------------------


def _python(impl: str) -> Path | None:
    if impl in ("floor", "ours"):
        return Path(sys.executable)
    python = PEERS[impl]
    return python if python.exists() else None


def _measure(impl: str, python: Path, url: str, runs: int) -> dict[str, float] | str:
    command = [str(python), __file__, "--child", impl, url, str(runs)]
    env = {**os.environ, "PYTHONPATH": ""}
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(child.pid, {0})
    out, err = child.communicate(timeout=900)
    if child.returncode:
        return err.strip().splitlines()[-1] if err.strip() else f"exit {child.returncode}"
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=3, metavar=("IMPL", "URL", "RUNS"))
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        impl, url, runs = args.child
        print(json.dumps(asyncio.run(_child(impl, url, int(runs)))))
        return
    sys.path.insert(0, str(HERE.parent))
    from _common import MockServerProcess, pin

    impls = {impl: _python(impl) for impl in CLIENTS}
    missing = [impl for impl, python in impls.items() if python is None]
    for impl in missing:
        print(f"{impl}: no venv (make bench-peers builds it); skipped")
    report: dict[str, Any] = {"load_average": os.getloadavg(), "scenarios": {}}
    for scenario in args.scenarios:
        with MockServerProcess(list(SCENARIOS[scenario])) as server:
            pin(server.pid, 1)
            cpu: dict[str, list[float]] = {}
            failed: dict[str, str] = {}
            for _ in range(args.rounds):
                for impl, python in impls.items():
                    if python is None or impl in failed:
                        continue
                    result = _measure(impl, python, server.url, args.runs)
                    if isinstance(result, str):
                        failed[impl] = result
                    else:
                        cpu.setdefault(impl, []).append(result["cpu"])
        floor = statistics.median(cpu["floor"])
        rows = {impl: statistics.median(v) / floor for impl, v in cpu.items()}
        report["scenarios"][scenario] = {
            "cpu_us": {impl: statistics.median(v) * 1e6 for impl, v in cpu.items()},
            "ratio": rows,
            "failed": failed,
        }
        print(f"\n{scenario}: client CPU per session, ratio to the httpx floor")
        for impl, ratio in rows.items():
            print(f"  {impl:<22} {statistics.median(cpu[impl]) * 1e6:>8.0f} µs  {ratio:>6.2f}x")
        for impl, why in failed.items():
            print(f"  {impl:<22} failed: {why[:200]}")
    report["load_average_after"] = os.getloadavg()
    print(f"load average {report['load_average']} -> {report['load_average_after']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
