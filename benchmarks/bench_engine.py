"""Engine overhead: decorators + ReAct loop against a raw httpx floor making the same HTTP calls.

The mock LLM server runs in its own processes (``python -m simplellmfunc.testing.mock_server``;
``--react-steps`` scripts multi-step turns). Every measurement runs in a fresh child process, so
CPU time and RSS belong to the client alone, and floor and engine children alternate over a few
rounds (the median is reported) so that noise from the rest of the machine hits both alike.

Three clients make the same HTTP calls with the same bodies:

- ``floor``: hand-written code on one ``httpx.AsyncClient``: builds the bodies, decodes the JSON
  replies, appends the messages a ReAct loop appends and, for (a), validates the reply into the
  pydantic model;
- ``provider``: the same hand-written loop on ``OpenAICompatible.complete`` (what the provider
  layer alone costs);
- ``engine``: ``@llm_function`` / ``@llm_chat`` (provider + engine + decorators).

Scenarios (issue 3):

- (a) one ``@llm_function`` call returning a pydantic model, sequentially;
- (b) one 3-step ReAct ``@llm_chat`` turn with a trivial tool, sequentially;
- (c) one turn with 8 parallel tools that each sleep 0.2 s: wall time against the ideal
  (0.2 s + two of the floor's round trips);
- (d) 1,000 concurrent 3-step sessions in one process: sessions/s, p99, peak RSS, RSS per live
  session and CPU per session.

Usage::

    python benchmarks/bench_engine.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil
from _common import (
    PERSON,
    SYSTEM,
    USER,
    engine_extract,
    floor_extract,
    floor_post,
    floor_react,
    person_model,
    rss_sampler,
)

NAP = 0.2
PARALLEL = 8
SESSIONS = 1000
CONNECTIONS = SESSIONS  # floor and engine share this connection limit
KEY = "sk-bench-0123456789"
TARGETS = {"cpu": 1.3, "ideal": 0.10, "rate": 0.8, "rss_kb": 100.0}
Call = Callable[[], Awaitable[Any]]


# -- floor: raw httpx -----------------------------------------------------------------------


def _floor_client(url: str) -> Any:
    import httpx

    return httpx.AsyncClient(
        base_url=url,
        headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        limits=httpx.Limits(max_connections=CONNECTIONS, max_keepalive_connections=CONNECTIONS),
        timeout=120,
    )


# -- provider: the same loop on OpenAICompatible.complete ----------------------------------


def _provider_turn(llm: Any) -> Call:
    from simplellmfunc.providers import LLMRequest, ToolSpec
    from simplellmfunc.types import Message, SystemMessage, ToolMessage, UserMessage

    spec = ToolSpec("noop", "", {"type": "object", "properties": {}})

    async def turn() -> str:
        messages: list[Message] = [SystemMessage(SYSTEM), UserMessage(USER)]
        while True:
            response = await llm.complete(LLMRequest(tuple(messages), (spec,)))
            messages.append(response.message)
            if not response.message.tool_calls:
                return str(response.text)
            messages += [ToolMessage(c.id, "done") for c in response.message.tool_calls]

    return turn


def _provider_extract(llm: Any) -> Call:
    from simplellmfunc.providers import LLMRequest, ResponseFormat
    from simplellmfunc.types import SystemMessage, UserMessage

    person = person_model()
    response_format = ResponseFormat("result", person.model_json_schema())

    async def extract() -> Any:
        messages = (
            SystemMessage("Extract the person."),
            UserMessage("text (str): Ada Lovelace, 36, ada@example.com\n"),
        )
        response = await llm.complete(LLMRequest(messages, response_format=response_format))
        return person.model_validate_json(response.text)

    return extract


# -- engine: the decorators -----------------------------------------------------------------


def _engine_turn(llm: Any, tool_name: str, nap: float) -> Call:
    from simplellmfunc import llm_chat, tool

    @tool(name=tool_name)
    async def work() -> str:
        """Do the work."""
        if nap:
            await asyncio.sleep(nap)
        return "done"

    @llm_chat(llm, toolkit=[work])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You help."""

    async def turn() -> str:
        outputs = [text async for text, _ in agent(USER, history=[])]
        return str(outputs[-1])

    return turn


# -- child processes: one measurement each --------------------------------------------------


async def _sequential(call: Call, runs: int) -> dict[str, float]:
    for _ in range(max(runs // 10, 5)):  # warm-up: imports, caches, the connection
        await call()
    cpu = time.process_time()
    latencies = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)
    return {
        "cpu": (time.process_time() - cpu) / runs,
        "median": statistics.median(latencies),
    }


async def _concurrent(call: Call, sessions: int) -> dict[str, float]:
    await asyncio.gather(*(call() for _ in range(20)))  # warm-up
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)

    baseline = psutil.Process().memory_info().rss
    with rss_sampler() as rss:
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(sessions)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    latencies.sort()
    return {
        "rate": sessions / wall,
        "p99": latencies[int(len(latencies) * 0.99) - 1],
        "cpu": cpu / sessions,
        "peak_rss": rss["peak"],
        "rss_per_session": max(rss["peak"] - baseline, 0) / sessions,
    }


def _make_call(scenario: str, impl: str, url: str) -> tuple[Any, Call]:
    if impl == "floor":
        client = _floor_client(url)

        def post(body: dict[str, Any]) -> Awaitable[dict[str, Any]]:
            return floor_post(client, body)

        if scenario == "a":
            return client, floor_extract(post)
        return client, floor_react(post, "nap" if scenario == "c" else "noop", _nap(scenario))
    from simplellmfunc import OpenAICompatible

    # The same connection limit as the floor's client: like against like.
    llm = OpenAICompatible(KEY, "bench", url, max_retries=0, max_connections=CONNECTIONS)
    if impl == "provider":
        return llm, _provider_extract(llm) if scenario == "a" else _provider_turn(llm)
    if scenario == "a":
        return llm, engine_extract(llm)
    return llm, _engine_turn(llm, "nap" if scenario == "c" else "noop", _nap(scenario))


def _nap(scenario: str) -> float:
    return NAP if scenario == "c" else 0.0


async def _child(scenario: str, impl: str, url: str, runs: int) -> dict[str, float]:
    client, call = _make_call(scenario, impl, url)
    try:
        if scenario == "d":
            return await _concurrent(call, SESSIONS)
        return await _sequential(call, runs)
    finally:
        await client.aclose()


# -- the parent: servers, children, table ----------------------------------------------------


@contextmanager
def _server(*flags: str) -> Iterator[str]:
    command = [sys.executable, "-m", "simplellmfunc.testing.mock_server", "--port", "0", *flags]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            yield proc.stdout.readline().split()[1]
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _measure(scenario: str, impl: str, url: str, runs: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", scenario, impl, url, "--runs", str(runs)]
    output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600)
    result: dict[str, float] = json.loads(output.stdout)
    return result


def _rounds(
    scenario: str, impls: tuple[str, ...], url: str, runs: int, rounds: int
) -> dict[str, dict[str, float]]:
    """Alternate the clients over ``rounds``; the median of each figure per client."""
    results: dict[str, list[dict[str, float]]] = {impl: [] for impl in impls}
    for _ in range(rounds):
        for impl in impls:
            results[impl].append(_measure(scenario, impl, url, runs))
    return {
        impl: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        for impl, rs in results.items()
    }


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _sequential_row(label: str, steps: int, r: dict[str, dict[str, float]]) -> None:
    floor, provider, engine = (r[i]["cpu"] / steps * 1e6 for i in ("floor", "provider", "engine"))
    ratio = engine / floor
    print(
        f"{label:<24} {floor:>7.0f} {provider:>9.0f} {engine:>8.0f} {provider / floor:>8.2f}x"
        f" {ratio:>8.2f}x {r['floor']['median'] * 1e3:>8.2f} {r['engine']['median'] * 1e3:>8.2f}"
        f"   target <= {TARGETS['cpu']}x: {_verdict(ratio <= TARGETS['cpu'])}"
    )


def _concurrent_rows(r: dict[str, dict[str, float]]) -> None:
    print(f"(d) {SESSIONS} concurrent 3-step sessions in one process")
    print(
        f"    {'':<8} {'sessions/s':>10} {'p99 ms':>8} {'CPU/session µs':>15}"
        f" {'peak RSS MB':>12} {'RSS/live session KB':>20}"
    )
    for name in ("floor", "engine"):
        x = r[name]
        print(
            f"    {name:<8} {x['rate']:>10.0f} {x['p99'] * 1e3:>8.0f} {x['cpu'] * 1e6:>15.0f}"
            f" {x['peak_rss'] / 2**20:>12.1f} {x['rss_per_session'] / 1024:>20.1f}"
        )
    rate = r["engine"]["rate"] / r["floor"]["rate"]
    rss = r["engine"]["rss_per_session"] / 1024
    print(
        f"    sessions/s {rate:.2f}x floor (target >= {TARGETS['rate']}x):"
        f" {_verdict(rate >= TARGETS['rate'])}; RSS/live session {rss:.1f} KB"
        f" (target <= {TARGETS['rss_kb']:.0f} KB): {_verdict(rss <= TARGETS['rss_kb'])};"
        f" CPU/session {r['engine']['cpu'] / r['floor']['cpu']:.2f}x floor"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs and rounds")
    parser.add_argument("--child", nargs=3, metavar=("SCENARIO", "IMPL", "URL"))
    parser.add_argument("--runs", type=int, default=300, help="sequential calls per child")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per cell")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(*args.child, args.runs))))
        return
    runs, rounds = (100, 3) if args.quick else (args.runs, args.rounds)
    clients = ("floor", "provider", "engine")
    with (
        _server("--reply-text", PERSON) as url_a,
        _server("--react-steps", "3", "--tool-name", "noop") as url_b,
        _server("--react-steps", "2", "--tool-name", "nap", "--parallel", str(PARALLEL)) as url_c,
    ):
        print(f"mock server in its own process; {rounds} rounds x {runs} sequential calls")
        print("CPU per LLM round trip (µs), median of the rounds; latency per call (ms)")
        print(
            f"{'scenario':<24} {'floor':>7} {'provider':>9} {'engine':>8} {'prov/fl':>9}"
            f" {'eng/fl':>9} {'floor ms':>8} {'eng ms':>8}"
        )
        _sequential_row("(a) llm_function", 1, _rounds("a", clients, url_a, runs, rounds))
        b = _rounds("b", clients, url_b, runs, rounds)
        _sequential_row("(b) llm_chat 3 steps", 3, b)
        c = _rounds("c", ("floor", "engine"), url_c, 5 if args.quick else 10, rounds)
        round_trip = b["floor"]["median"] / 3
        ideal = NAP + 2 * round_trip
        over = c["engine"]["median"] / ideal - 1
        print(
            f"(c) 8 parallel tools x 0.2 s: engine {c['engine']['median'] * 1e3:.1f} ms,"
            f" floor {c['floor']['median'] * 1e3:.1f} ms, ideal {ideal * 1e3:.1f} ms"
            f" (0.2 s + 2 x {round_trip * 1e3:.2f} ms): {over:+.1%} over ideal"
            f"   target <= +{TARGETS['ideal']:.0%}: {_verdict(over <= TARGETS['ideal'])}"
        )
        _concurrent_rows(_rounds("d", ("floor", "engine"), url_b, 0, 1 if args.quick else 2))


if __name__ == "__main__":
    main()
