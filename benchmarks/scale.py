"""Performance at scale (issue 19): CPU per call and throughput up to 5,000 concurrent sessions.

Every figure is a ratio to a hand-written raw-httpx floor making the same HTTP calls against the
same loopback mock server, measured in the same run. The mock server is pinned to one core and
every client to the other (``os.sched_setaffinity``), each client measurement runs in a fresh
process, and floor and engine children alternate over the rounds (the median is reported), so
load from the rest of the machine hits both alike.

Sequential scenarios (client CPU per call; wall time per call):

- ``typed``: one ``@llm_function`` call returning a pydantic model;
- ``react``: one 3-step ReAct ``@llm_chat`` turn (two tool rounds, then the answer);
- ``parallel``: one turn with 8 parallel tool calls (one batch, then the answer), the tools run
  concurrently (the floor runs them with ``asyncio.gather``);
- ``stream``: one streamed ``@llm_chat`` turn (210 characters in 16 SSE chunks), sent as fast
  as the server can: the client is the bottleneck, so this is the per-chunk CPU cost;
- ``paced``: the same turn with 1 ms between chunks (a model streaming 1,000 chunks/s, faster
  than any hosted one): what a streamed turn costs when the model, not the client, sets the pace.

Concurrency sweep: N concurrent 3-step sessions in one process (N = 1 ... 5,000): sessions/s,
p99 session latency, RSS per live session, errors. Two floors: ``floor`` is plain httpx with the
pool the issue names (1,000 connections, 100 kept alive); ``floor-limited`` is the same client
behind an ``anyio.Semaphore`` of the pool size (what our transport does). Ratios are taken to
the better floor at each N.

Usage::

    python benchmarks/scale.py [--quick] [--out results.json]
    python benchmarks/scale.py --profile react|typed|stream|sweep:1000   # cProfile, top entries
    python benchmarks/scale.py --profile typed --profile-impl floor      # the floor's profile
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
from _common import (
    PERSON,
    SYSTEM,
    USER,
    MockServerProcess,
    engine_extract,
    floor_extract,
    floor_post,
    floor_react,
    percentile,
    pin,
    rss_sampler,
)

REPLY = "Hello! " * 30  # 210 characters
CHUNKS = 16
KEY = "sk-bench-0123456789"
FLOOR_CONNECTIONS, FLOOR_KEEPALIVE = 1000, 100  # the floor of the issue
SWEEP = (1, 100, 500, 1000, 5000)
PLAIN_FLOOR_MAX = 1000
LIMITED = ("floor-limited", "engine")
SCENARIOS = ("typed", "react", "parallel", "stream", "paced")
PARALLEL = 8  # tool calls in the parallel scenario's batch
PACE = 0.001  # seconds between chunks in the paced scenario
#: Targets of issues 19 and 34 (ratios to the floor).
TARGETS: dict[str, tuple[str, float]] = {
    "cpu.typed": ("<=", 1.10),
    "cpu.react": ("<=", 1.15),
    "cpu.parallel": ("<=", 1.20),
    "wall.stream": ("<=", 1.00),
    "rate.500": (">=", 1.00),
    "rate.1000": (">=", 1.00),
    "rate.5000": (">=", 1.00),
    "p99.500": ("<=", 1.20),
    "p99.1000": ("<=", 1.20),
    "p99.5000": ("<=", 1.20),
}
RSS_TARGET_KB = 16.0
RSS_FROM = 100  # sessions: the memory target is checked from here on
CLIENT_CORE, SERVER_CORE = 0, 1
Call = Callable[[], Awaitable[Any]]


# -- the floor: raw httpx ---------------------------------------------------------------------


class Floor:
    """Hand-written calls on one ``httpx.AsyncClient`` (optionally behind a limiter)."""

    def __init__(self, url: str, limited: bool) -> None:
        self.client = httpx.AsyncClient(
            base_url=url,
            headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"},
            limits=httpx.Limits(
                max_connections=FLOOR_CONNECTIONS, max_keepalive_connections=FLOOR_KEEPALIVE
            ),
            timeout=httpx.Timeout(120, pool=600),
        )
        self.limiter = anyio.Semaphore(FLOOR_CONNECTIONS, fast_acquire=True) if limited else None

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.limiter is None:
            return await floor_post(self.client, body)
        async with self.limiter:
            return await floor_post(self.client, body)

    def react(self) -> Call:
        return floor_react(self.post)

    def parallel(self) -> Call:
        return floor_react(self.post)

    def typed(self) -> Call:
        return floor_extract(self.post)

    def stream(self) -> Call:
        async def turn() -> str:
            body = {
                "model": "bench",
                "messages": [
                    {"role": "system", "content": SYSTEM},
                    {"role": "user", "content": USER},
                ],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            text, buffer = [], b""
            async with self.client.stream(
                "POST", "/chat/completions", content=json.dumps(body)
            ) as r:
                r.raise_for_status()
                async for chunk in r.aiter_raw():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.startswith(b"data: ") and line != b"data: [DONE]":
                            for choice in json.loads(line[6:]).get("choices", ()):
                                text.append(choice["delta"].get("content") or "")
            return "".join(text)

        return turn

    def paced(self) -> Call:
        return self.stream()

    async def aclose(self) -> None:
        await self.client.aclose()


# -- ours: the decorators ---------------------------------------------------------------------


class Engine:
    """The same calls through ``@llm_function`` / ``@llm_chat`` with the default provider."""

    def __init__(self, url: str) -> None:
        from simplellmfunc import OpenAICompatible

        self.llm = OpenAICompatible(KEY, "bench", url, max_retries=0)

    def react(self) -> Call:
        from simplellmfunc import llm_chat, tool

        @tool(name="noop")
        async def noop() -> str:
            """Do the work."""
            return "done"

        @llm_chat(self.llm, toolkit=[noop])
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        async def turn() -> str:
            outputs = [text async for text, _ in agent(USER, history=[])]
            return str(outputs[-1])

        return turn

    def parallel(self) -> Call:
        return self.react()

    def typed(self) -> Call:
        return engine_extract(self.llm)

    def stream(self) -> Call:
        from simplellmfunc import llm_chat

        @llm_chat(self.llm, stream=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        async def turn() -> str:
            return "".join([text async for text, _ in agent(USER, history=[])])

        return turn

    def paced(self) -> Call:
        return self.stream()

    async def aclose(self) -> None:
        await self.llm.aclose()


def _client(impl: str, url: str) -> Floor | Engine:
    if impl == "engine":
        return Engine(url)
    return Floor(url, limited=impl == "floor-limited")


# -- child processes: one measurement each ----------------------------------------------------


async def _sequential(call: Call, runs: int) -> dict[str, float]:
    for _ in range(max(runs // 10, 10)):  # warm-up: imports, caches, the connection
        await call()
    gc.collect()
    cpu = time.process_time()
    latencies = []
    for _ in range(runs):
        started = time.perf_counter()
        await call()
        latencies.append(time.perf_counter() - started)
    return {"cpu": (time.process_time() - cpu) / runs, "wall": statistics.median(latencies)}


async def _concurrent(call: Call, sessions: int) -> dict[str, float]:
    """``sessions`` concurrent sessions started at once: rate, p99, RSS per live session."""
    await asyncio.gather(*(call() for _ in range(min(sessions, 50))))  # warm-up
    gc.collect()
    latencies: list[float] = []
    errors = 0

    async def one() -> None:
        nonlocal errors
        started = time.perf_counter()
        try:
            await call()
        except Exception:
            errors += 1
            return
        latencies.append(time.perf_counter() - started)

    baseline = psutil.Process().memory_info().rss
    with rss_sampler() as rss:
        cpu, wall = time.process_time(), time.perf_counter()
        await asyncio.gather(*(one() for _ in range(sessions)))
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {
        "rate": sessions / wall,
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
        "cpu": cpu / sessions,
        "rss_kb": max(rss["peak"] - baseline, 0) / sessions / 1024,
        "errors": errors,
    }


async def _child(kind: str, impl: str, url: str, runs: int) -> dict[str, float]:
    client = _client(impl, url)
    try:
        if kind.startswith("sweep:"):
            return await _concurrent(client.react(), int(kind.split(":")[1]))
        return await _sequential(getattr(client, kind)(), runs)
    finally:
        await client.aclose()


def _profile(kind: str, impl: str, url: str, runs: int) -> None:
    """cProfile one client on one scenario, timed in process CPU time (not wall)."""

    async def run() -> None:
        client = _client(impl, url)
        try:
            if kind.startswith("sweep:"):
                call, n = client.react(), int(kind.split(":")[1])
                await call()
                profiler = cProfile.Profile(time.process_time)
                profiler.enable()
                await _concurrent(call, n)
            else:
                call = getattr(client, kind)()
                await _sequential(call, 20)
                profiler = cProfile.Profile(time.process_time)
                profiler.enable()
                await _sequential(call, runs)
            profiler.disable()
        finally:
            await client.aclose()
        stats = pstats.Stats(profiler)
        out = Path(".cache/bench") / f"profile-{impl}-{kind.replace(':', '-')}.prof"
        out.parent.mkdir(parents=True, exist_ok=True)
        stats.dump_stats(out)
        _print_by_package(stats, runs)
        stats.sort_stats("tottime").print_stats(25)
        print(f"profile written to {out} (python -m pstats {out})")

    asyncio.run(run())


def _package(filename: str) -> str:
    """The package a profiled function belongs to (``simplellmfunc.engine``, ``httpcore``...)."""
    if "simplellmfunc" in filename:
        parts = filename.rsplit("simplellmfunc/", 1)[1].split("/")
        return (
            "simplellmfunc." + parts[0].removesuffix(".py") if len(parts) > 1 else ("simplellmfunc")
        )
    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1].split("/", 1)[0]
    if filename.startswith(("~", "<")):
        return "builtins"
    return "stdlib:" + Path(filename).stem


def _print_by_package(stats: pstats.Stats, calls: int) -> None:
    """Own time per package, in µs per call: where the time goes, not in which function."""
    own: dict[str, float] = {}
    for (filename, _, _), row in stats.stats.items():  # type: ignore[attr-defined]
        package = _package(filename)
        own[package] = own.get(package, 0.0) + row[2]
    total = sum(own.values())
    print(f"own time by package (µs per call, {calls} calls, total {total / calls * 1e6:.0f})")
    for package, seconds in sorted(own.items(), key=lambda kv: -kv[1])[:20]:
        print(f"  {package:<32} {seconds / calls * 1e6:>8.0f}  {seconds / total:>5.1%}")


# -- the parent -------------------------------------------------------------------------------


def _measure(kind: str, impl: str, url: str, runs: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", kind, impl, url, "--runs", str(runs)]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pin(child.pid, CLIENT_CORE)
    out, err = child.communicate(timeout=900)
    if child.returncode:
        raise RuntimeError(f"{kind} {impl} failed: {err[-2000:]}")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def _rounds(
    kind: str, impls: tuple[str, ...], url: str, runs: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """Alternate the clients over ``rounds``; per client the median of each figure and the
    spread (max/min - 1) of the main one."""
    results: dict[str, list[dict[str, float]]] = {impl: [] for impl in impls}
    for _ in range(rounds):
        for impl in impls:
            results[impl].append(_measure(kind, impl, url, runs))
    out: dict[str, dict[str, Any]] = {}
    for impl, rs in results.items():
        figures: dict[str, Any] = {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        main = "rate" if kind.startswith("sweep:") else "cpu"
        values = [r[main] for r in rs]
        figures["spread"] = max(values) / min(values) - 1 if min(values) > 0 else 0.0
        figures["rounds"] = rs
        out[impl] = figures
    return out


@contextmanager
def _server(*flags: str) -> Iterator[str]:
    with MockServerProcess(list(flags)) as server:
        pin(server.pid, SERVER_CORE)
        yield server.url


def _machine() -> dict[str, Any]:
    from importlib.metadata import version

    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
        "python": platform.python_version(),
        "versions": {
            name: version(name) for name in ("simplellmfunc", "httpx", "httpcore", "anyio")
        },
    }


def _ratios(results: dict[str, Any]) -> dict[str, float]:
    ratios: dict[str, float] = {}
    for kind, r in results["sequential"].items():
        ratios[f"cpu.{kind}"] = r["engine"]["cpu"] / r["floor"]["cpu"]
        ratios[f"wall.{kind}"] = r["engine"]["wall"] / r["floor"]["wall"]
    for n, r in results["sweep"].items():
        floors = [impl for impl in ("floor", "floor-limited") if impl in r]
        best = max(floors, key=lambda impl: r[impl]["rate"])
        ratios[f"rate.{n}"] = r["engine"]["rate"] / r[best]["rate"]
        ratios[f"p99.{n}"] = r["engine"]["p99"] / r[best]["p99"]
        ratios[f"cpu.sweep.{n}"] = r["engine"]["cpu"] / r[best]["cpu"]
    return ratios


def _report(results: dict[str, Any]) -> None:
    print("\nsequential: client CPU per call (µs) and median wall per call (ms)")
    print(
        f"{'scenario':<8} {'floor cpu':>10} {'ours cpu':>9} {'ratio':>7} {'spread':>7}"
        f" {'floor ms':>9} {'ours ms':>8} {'ratio':>7}"
    )
    for kind, r in results["sequential"].items():
        f, e = r["floor"], r["engine"]
        print(
            f"{kind:<8} {f['cpu'] * 1e6:>10.0f} {e['cpu'] * 1e6:>9.0f} {e['cpu'] / f['cpu']:>6.2f}x"
            f" {max(f['spread'], e['spread']):>6.0%} {f['wall'] * 1e3:>9.2f}"
            f" {e['wall'] * 1e3:>8.2f} {e['wall'] / f['wall']:>6.2f}x"
        )
    print("\nconcurrent 3-step sessions in one process")
    print(
        f"{'N':>5} {'impl':<14} {'sessions/s':>10} {'p50 ms':>8} {'p99 ms':>8}"
        f" {'cpu µs/sess':>11} {'KB/session':>10} {'errors':>6} {'spread':>6}"
    )
    for n, r in results["sweep"].items():
        for impl, x in r.items():
            print(
                f"{n:>5} {impl:<14} {x['rate']:>10.0f} {x['p50'] * 1e3:>8.0f}"
                f" {x['p99'] * 1e3:>8.0f} {x['cpu'] * 1e6:>11.0f} {x['rss_kb']:>10.1f}"
                f" {x['errors']:>6.0f} {x['spread']:>5.0%}"
            )
    print("\ntargets (ratios to the floor; sweep: to the better floor)")
    for name, value in results["ratios"].items():
        target = TARGETS.get(name)
        verdict = ""
        if target:
            op, bound = target
            met = value <= bound if op == "<=" else value >= bound
            verdict = f"{op} {bound:.2f}: {'ok' if met else 'MISSED'}"
        print(f"  {name:<16} {value:>6.2f}x  {verdict}")
    # From 100 sessions on: one session's figure is the allocator's granularity (the floor's
    # is the same), not what a session holds.
    at_scale = [r for n, r in results["sweep"].items() if int(n) >= RSS_FROM]
    worst = max((r["engine"]["rss_kb"] for r in at_scale), default=0.0)
    print(
        f"  RSS per live session (worst N >= {RSS_FROM}) {worst:.1f} KB  <= {RSS_TARGET_KB:.0f} KB:"
        f" {'ok' if worst <= RSS_TARGET_KB else 'MISSED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs, rounds and sizes")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "IMPL", "URL"))
    parser.add_argument("--profile", metavar="KIND", help="cProfile ours on one scenario")
    parser.add_argument(
        "--profile-impl", default="engine", choices=("engine", "floor", "floor-limited")
    )
    parser.add_argument("--runs", type=int, default=300, help="sequential calls per child")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per cell")
    parser.add_argument("--sweep", type=int, nargs="*", default=list(SWEEP), help="N values")
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), help="sequential ones")
    parser.add_argument("--sweep-rounds", type=int, default=3, help="alternating rounds per N")
    parser.add_argument("--out", type=Path, help="write the results (JSON) here")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_child(*args.child, args.runs))))
        return
    runs, rounds = (100, 3) if args.quick else (args.runs, args.rounds)
    sweep = [n for n in args.sweep if not args.quick or n <= 1000]
    flags = {
        "typed": ("--reply-text", PERSON),
        "react": ("--react-steps", "3", "--tool-name", "noop"),
        "parallel": ("--react-steps", "2", "--tool-name", "noop", "--parallel", str(PARALLEL)),
        "stream": ("--reply-text", REPLY, "--chunks", str(CHUNKS)),
        "paced": ("--reply-text", REPLY, "--chunks", str(CHUNKS), "--chunk-delay", str(PACE)),
    }
    if args.profile:
        pin(os.getpid(), CLIENT_CORE)
        kind = "react" if args.profile.startswith("sweep:") else args.profile
        with _server(*flags[kind]) as url:
            _profile(args.profile, args.profile_impl, url, runs)
        return
    results: dict[str, Any] = {"machine": _machine(), "sequential": {}, "sweep": {}}
    started = time.perf_counter()
    for kind in args.scenarios:
        with _server(*flags[kind]) as url:
            results["sequential"][kind] = _rounds(kind, ("floor", "engine"), url, runs, rounds)
        print(f"{kind}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    sweep_rounds = 1 if args.quick else args.sweep_rounds
    with _server(*flags["react"]) as url:
        for n in sweep:
            # Plain httpx past 1,000: thousands of requests queued inside httpcore, which scans
            # them all against every connection per request; it did not finish 5,000 sessions
            # in 6 minutes (under 12 sessions/s), so only the limited floor runs there.
            impls = ("floor", "floor-limited", "engine") if n <= PLAIN_FLOOR_MAX else LIMITED
            r = _rounds(f"sweep:{n}", impls, url, 0, sweep_rounds)
            results["sweep"][str(n)] = r
            print(f"sweep {n}: done ({time.perf_counter() - started:.0f} s)", flush=True)
    results["ratios"] = _ratios(results)
    results["machine"]["load_average_after"] = os.getloadavg()
    _report(results)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"\nresults written to {args.out}")


if __name__ == "__main__":
    main()
