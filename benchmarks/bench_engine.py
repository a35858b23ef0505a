"""Engine overhead: decorators + ReAct loop against a raw httpx floor making the same HTTP calls.

The mock LLM server runs in its own processes (``python -m simplellmfunc.testing.mock_server``,
``--react-steps`` scripts multi-step turns); every measurement runs in a fresh child process, so
CPU time and RSS belong to the client alone. The floor is hand-written code on one
``httpx.AsyncClient``: it builds the same request bodies, decodes the JSON replies, appends the
messages a ReAct loop appends and, for (a), validates the reply into the pydantic model.

Scenarios (issue 3):

- (a) one ``@llm_function`` call returning a pydantic model, sequentially;
- (b) one 3-step ReAct ``@llm_chat`` turn with a trivial tool, sequentially;
- (c) one turn with 8 parallel tools that each sleep 0.2 s: wall time against the ideal
  (0.2 s + the floor's two round trips);
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
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psutil

PERSON = '{"name": "Ada Lovelace", "age": 36, "email": "ada@example.com"}'
NAP = 0.2
PARALLEL = 8
SESSIONS = 1000
KEY = "sk-bench-0123456789"
HEADER = f"{'scenario':<34} {'floor':>9} {'engine':>9} {'ratio':>7} {'floor ms':>8} {'eng ms':>8}"
TARGETS = {"cpu": 1.3, "ideal": 0.10, "rate": 0.8, "rss_kb": 100.0}


# -- the floor: raw httpx -------------------------------------------------------------------


def _floor_client(url: str) -> Any:
    import httpx

    return httpx.AsyncClient(
        base_url=url,
        headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
        limits=httpx.Limits(max_connections=SESSIONS, max_keepalive_connections=SESSIONS),
        timeout=120,
    )


async def _floor_post(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    response = await client.post("/chat/completions", content=json.dumps(body))
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data["choices"][0]["message"]


def _tool_spec(name: str) -> dict[str, Any]:
    parameters = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": "", "parameters": parameters},
    }


async def _floor_turn(client: Any, tool: str, nap: float = 0.0) -> str:
    """One ReAct turn by hand: call, run the requested tools, call again until text."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You help."},
        {"role": "user", "content": "go"},
    ]
    tools = [_tool_spec(tool)]
    while True:
        message = await _floor_post(
            client, {"model": "bench", "messages": messages, "tools": tools}
        )
        calls = message.get("tool_calls") or []
        messages.append(
            {"role": "assistant", "content": message.get("content"), "tool_calls": calls}
        )
        if not calls:
            return str(message.get("content"))
        if nap:
            await asyncio.gather(*(asyncio.sleep(nap) for _ in calls))
        messages.extend({"role": "tool", "tool_call_id": c["id"], "content": "done"} for c in calls)


def _person_model() -> Any:
    from pydantic import BaseModel

    class Person(BaseModel):
        name: str
        age: int
        email: str

    return Person


async def _floor_extract(client: Any, person: Any, schema: dict[str, Any]) -> Any:
    body = {
        "model": "bench",
        "messages": [
            {"role": "system", "content": "Extract the person."},
            {"role": "user", "content": "text (str): Ada Lovelace, 36, ada@example.com\n"},
        ],
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "result",
                "schema": person.model_json_schema(),
                "strict": False,
            },
        },
    }
    message = await _floor_post(client, body)
    return person.model_validate_json(message["content"])


# -- the framework --------------------------------------------------------------------------


def _framework(url: str) -> Any:
    from simplellmfunc import OpenAICompatible

    return OpenAICompatible(KEY, "bench", url, max_retries=0)


def _agent(llm: Any, nap: float = 0.0) -> Callable[[], Awaitable[str]]:
    from simplellmfunc import llm_chat, tool

    @tool(name="nap" if nap else "noop")
    async def work() -> str:
        """Do the work."""
        if nap:
            await asyncio.sleep(nap)
        return "done"

    @llm_chat(llm, toolkit=[work])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You help."""

    async def turn() -> str:
        outputs = [text async for text, _ in agent("go", history=[])]
        return str(outputs[-1])

    return turn


def _extractor(llm: Any, person: Any) -> Callable[[], Awaitable[Any]]:
    from simplellmfunc import llm_function

    async def extract(text: str) -> Any:
        """Extract the person."""

    extract.__annotations__["return"] = person
    function = llm_function(llm)(extract)
    return lambda: function("Ada Lovelace, 36, ada@example.com")


# -- child processes: one measurement each --------------------------------------------------


async def _sequential(call: Callable[[], Awaitable[Any]], runs: int) -> dict[str, float]:
    for _ in range(max(runs // 10, 5)):  # warm-up: imports, caches, the connection
        await call()
    cpu, wall = time.process_time(), time.perf_counter()
    latencies = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)
    return {
        "cpu": time.process_time() - cpu,
        "wall": time.perf_counter() - wall,
        "median": statistics.median(latencies),
        "runs": runs,
    }


@contextmanager
def _rss_sampler() -> Iterator[dict[str, float]]:
    """Sample the RSS every 5 ms in a thread; ``peak`` is the highest seen."""
    process, result, stop = psutil.Process(), {"peak": 0.0}, threading.Event()

    def sample() -> None:
        while not stop.wait(0.005):
            result["peak"] = max(result["peak"], process.memory_info().rss)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()


async def _concurrent(call: Callable[[], Awaitable[Any]], sessions: int) -> dict[str, float]:
    await asyncio.gather(*(call() for _ in range(20)))  # warm-up
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)

    baseline = psutil.Process().memory_info().rss
    with _rss_sampler() as rss:
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


async def _child(scenario: str, impl: str, url: str, runs: int) -> dict[str, float]:
    floor = impl == "floor"
    client = _floor_client(url) if floor else _framework(url)
    try:
        if scenario == "a":
            person = _person_model()
            schema = person.model_json_schema()
            call = (
                (lambda: _floor_extract(client, person, schema))
                if floor
                else _extractor(client, person)
            )
            return await _sequential(call, runs)
        nap = NAP if scenario == "c" else 0.0
        tool = "nap" if nap else "noop"
        turn = (lambda: _floor_turn(client, tool, nap)) if floor else _agent(client, nap)
        if scenario == "d":
            return await _concurrent(turn, SESSIONS)
        return await _sequential(turn, runs)
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


def _verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def _report_sequential(
    label: str, steps: int, floor: dict[str, float], fw: dict[str, float]
) -> None:
    per_floor = floor["cpu"] / (floor["runs"] * steps) * 1e6
    per_fw = fw["cpu"] / (fw["runs"] * steps) * 1e6
    ratio = per_fw / per_floor
    print(
        f"{label:<34} {per_floor:>9.0f} {per_fw:>9.0f} {ratio:>6.2f}x"
        f" {floor['median'] * 1e3:>8.2f} {fw['median'] * 1e3:>8.2f}"
        f"   target <= {TARGETS['cpu']}x: {_verdict(ratio <= TARGETS['cpu'])}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--child", nargs=3, metavar=("SCENARIO", "IMPL", "URL"))
    parser.add_argument("--runs", type=int, default=300)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(*args.child, args.runs))))
        return
    runs = 100 if args.quick else args.runs
    with (
        _server("--reply-text", PERSON) as url_a,
        _server("--react-steps", "3", "--tool-name", "noop") as url_b,
        _server("--react-steps", "2", "--tool-name", "nap", "--parallel", str(PARALLEL)) as url_c,
    ):
        print(f"mock servers in 3 processes; {runs} sequential runs per cell; CPU in µs")
        print(HEADER)
        a = [_measure("a", impl, url_a, runs) for impl in ("floor", "framework")]
        _report_sequential("(a) llm_function -> pydantic, /RT", 1, *a)
        b = [_measure("b", impl, url_b, runs) for impl in ("floor", "framework")]
        _report_sequential("(b) llm_chat 3-step ReAct, /RT", 3, *b)
        c_runs = 5 if args.quick else 10
        floor_c, fw_c = (_measure("c", impl, url_c, c_runs) for impl in ("floor", "framework"))
        round_trip = b[0]["median"] / 3
        ideal = NAP + 2 * round_trip
        over = fw_c["median"] / ideal - 1
        print(
            f"{'(c) 8 parallel tools x 0.2 s, wall':<34} floor {floor_c['median'] * 1e3:.1f} ms,"
            f" engine {fw_c['median'] * 1e3:.1f} ms, ideal {ideal * 1e3:.1f} ms"
            f" (0.2 s + 2 x {round_trip * 1e3:.2f} ms): {over:+.1%}"
            f"   target <= +{TARGETS['ideal']:.0%}: {_verdict(over <= TARGETS['ideal'])}"
        )
        floor_d, fw_d = (_measure("d", impl, url_b, 0) for impl in ("floor", "framework"))
        _report_concurrent(floor_d, fw_d)


def _report_concurrent(floor: dict[str, float], fw: dict[str, float]) -> None:
    print(f"(d) {SESSIONS} concurrent 3-step sessions, one process")
    print(
        f"    {'':<10} {'sessions/s':>10} {'p99 ms':>8} {'CPU/session µs':>15}"
        f" {'peak RSS MB':>12} {'RSS/live session KB':>20}"
    )
    for name, r in (("floor", floor), ("engine", fw)):
        print(
            f"    {name:<10} {r['rate']:>10.0f} {r['p99'] * 1e3:>8.0f} {r['cpu'] * 1e6:>15.0f}"
            f" {r['peak_rss'] / 2**20:>12.1f} {r['rss_per_session'] / 1024:>20.1f}"
        )
    rate = fw["rate"] / floor["rate"]
    rss = fw["rss_per_session"] / 1024
    print(
        f"    sessions/s {rate:.2f}x floor (target >= {TARGETS['rate']}x):"
        f" {_verdict(rate >= TARGETS['rate'])}; RSS/session {rss:.1f} KB"
        f" (target <= {TARGETS['rss_kb']:.0f} KB): {_verdict(rss <= TARGETS['rss_kb'])};"
        f" CPU/session {fw['cpu'] / floor['cpu']:.2f}x floor"
    )


if __name__ == "__main__":
    main()
