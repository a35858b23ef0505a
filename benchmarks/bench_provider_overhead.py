"""What OpenAICompatible costs over raw httpx, against the mock server in a separate process.

Variants, per API (``complete`` and ``stream``):

- floor ``complete``: ``httpx.AsyncClient.post`` + ``response.json()``;
- floor ``stream``: ``client.stream("POST")``, iterate raw chunks, split SSE lines, ``json.loads``
  each data line;
- ``OpenAICompatible.complete`` / ``OpenAICompatible.stream`` (every event consumed).

Floor and provider send the same body with the same API key header, through clients with the
same ``httpx.Limits`` (100 connections) and timeouts. The mock server runs in its own process.

Why 100 connections: httpcore's pool scans every connection (and, for each idle one, every
connection again) whenever a request starts or ends, so with hundreds of connections both
variants spend milliseconds per call in the pool and, at concurrency 500, sometimes collapse to a
few requests per second, which says nothing about the code above the pool. With 100, requests
beyond that queue in the pool, for both variants alike.

Method. Both variants of an API run in one worker process, interleaved (latency: alternating
blocks of calls at concurrency 1; throughput: alternating bursts at each concurrency, each a
measured steady-state window after a ramp-up), so they share whatever else the machine is doing;
CPU is this process's ``time.process_time`` per call. Peak RSS is a per-process figure, so each
variant also runs alone in a short worker (a burst at the highest concurrency) that reports
``ru_maxrss``. Figures are medians over the interleaved blocks and windows.

Targets (issue 2): latency <= 1.10x the floor at concurrency 1; throughput >= 0.9x the floor at
concurrency 500; CPU per call <= 1.25x the floor.

Usage::

    python benchmarks/bench_provider_overhead.py [--calls 500] [--rounds 3]
    python benchmarks/bench_provider_overhead.py --profile stream   # cProfile of the provider
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import psutil
from _common import MockServerProcess, measure, peak_rss_mb, print_table, run_worker, summarize

from simplellmfunc._messages import UserMessage
from simplellmfunc.providers import FinishEvent, LLMRequest, OpenAICompatible

APIS = ("complete", "stream")
KINDS = ("floor", "provider")
CONCURRENCY = (100, 500)
BLOCK = 50  # calls per latency block
RAMP_UP = 0.5  # seconds of each burst before its measured window (connections open)
KEY = "sk-bench-0000000000000000000000000000"
MODEL = "gpt-4o-mini"
PROMPT = "Say hello."
REPLY = "Hello! " * 30  # 210 characters
CHUNKS = 16
MAX_CONNECTIONS = 100  # see the module docstring
TIMEOUT = httpx.Timeout(120.0, connect=10.0, pool=600.0)  # what OpenAICompatible builds
TARGETS = {"latency": 1.10, "throughput": 0.90, "cpu": 1.25}

Call = Callable[[], Awaitable[object]]


# -- the variants --------------------------------------------------------------------------------


def _floor_body(stream: bool) -> dict[str, Any]:
    """Exactly the body OpenAICompatible sends."""
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": PROMPT}]}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def _floor_call(client: httpx.AsyncClient, url: str, api: str) -> Call:
    headers = {"authorization": f"Bearer {KEY}"}
    endpoint = f"{url}/chat/completions"
    body = _floor_body(api == "stream")

    async def complete() -> object:
        response = await client.post(endpoint, json=body, headers=headers)
        response.raise_for_status()
        return response.json()

    async def stream() -> object:
        events = []
        async with client.stream("POST", endpoint, json=body, headers=headers) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_raw():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        events.append(json.loads(line[6:]))
        return events

    return complete if api == "complete" else stream


def _provider_call(llm: OpenAICompatible, api: str) -> Call:
    request = LLMRequest((UserMessage(PROMPT),))

    async def complete() -> object:
        return await llm.complete(request)

    async def stream() -> object:
        final = None
        async for event in llm.stream(request):
            if isinstance(event, FinishEvent):
                final = event.response
        assert final is not None
        assert final.text == REPLY
        return final

    return complete if api == "complete" else stream


def _client() -> httpx.AsyncClient:
    limits = httpx.Limits(
        max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
    )
    return httpx.AsyncClient(limits=limits, timeout=TIMEOUT)


def _provider(url: str) -> OpenAICompatible:
    return OpenAICompatible(KEY, MODEL, url, max_connections=MAX_CONNECTIONS)


# -- measuring -----------------------------------------------------------------------------------


async def _block(call: Call, calls: int) -> tuple[list[float], float]:
    """``calls`` sequential calls: their latencies and the CPU seconds per call."""
    latencies = []
    with measure() as m:
        for _ in range(calls):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)
    return latencies, m.cpu / calls


async def _burst(call: Call, concurrency: int, seconds: float) -> tuple[float, float]:
    """``concurrency`` workers calling in a loop: requests per second and CPU per call.

    Only a steady-state window is measured: after a ramp-up, for ``seconds``. Then the workers
    are cancelled mid-call (httpcore scans its whole pool for every idle connection, so letting
    hundreds of calls finish one by one would cost more than the window itself).
    """
    done = 0

    async def worker() -> None:
        nonlocal done
        while True:
            await call()
            done += 1

    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
        await anyio.sleep(RAMP_UP)
        start = done
        with measure() as m:
            await anyio.sleep(seconds)
        calls = done - start
        group.cancel_scope.cancel()
    return calls / m.wall, m.cpu / max(calls, 1)


def _variant(kind: str, api: str, url: str) -> tuple[Call, Callable[[], Awaitable[None]]]:
    """A fresh client (own pool) for ``kind``, its call, and how to close it."""
    if kind == "floor":
        client = _client()
        return _floor_call(client, url, api), client.aclose
    llm = _provider(url)
    return _provider_call(llm, api), llm.aclose


async def _compare(
    api: str, url: str, calls: int, window: float, rounds: int, pid: int
) -> dict[str, Any]:
    """Floor and provider of one API, interleaved (see the module docstring)."""
    server = psutil.Process(pid)
    out: dict[str, Any] = {kind: {"lat": [], "cpu1": []} for kind in KINDS}
    variants = {kind: _variant(kind, api, url) for kind in KINDS}
    try:
        for call, _ in variants.values():  # warm up: imports, caches, the first connection
            await _block(call, BLOCK)
        for _ in range(max(1, calls // BLOCK)):
            for kind, (call, _) in variants.items():
                latencies, cpu = await _block(call, BLOCK)
                out[kind]["lat"] += latencies
                out[kind]["cpu1"].append(cpu)
        for concurrency in CONCURRENCY:
            for call, _ in variants.values():  # settle each pool at this load, unmeasured
                await _burst(call, concurrency, RAMP_UP)
            server_cpu = sum(server.cpu_times()[:2])
            started = time.perf_counter()
            for _ in range(rounds):
                for kind, (call, _) in variants.items():
                    rps, cpu = await _burst(call, concurrency, window)
                    out[kind].setdefault(f"rps{concurrency}", []).append(rps)
                    out[kind].setdefault(f"cpu{concurrency}", []).append(cpu)
            busy = sum(server.cpu_times()[:2]) - server_cpu
            out[f"server{concurrency}"] = 100 * busy / (time.perf_counter() - started)
    finally:
        for _, close in variants.values():
            await close()
    return out


async def _rss(kind: str, api: str, url: str, window: float) -> dict[str, float]:
    """One variant alone, through a burst at the highest concurrency: its peak RSS."""
    call, close = _variant(kind, api, url)
    try:
        await _block(call, BLOCK)
        await _burst(call, max(CONCURRENCY), window)
    finally:
        await close()
    return {"rss": peak_rss_mb()}


# -- the report ----------------------------------------------------------------------------------


def _figures(result: dict[str, Any], kind: str) -> dict[str, float]:
    data = result[kind]
    stats = summarize(data["lat"])
    figures = {
        "p50": stats.median * 1e3,
        "p95": stats.p95 * 1e3,
        "cpu1": statistics.median(data["cpu1"]) * 1e6,
    }
    for c in CONCURRENCY:
        figures[f"rps{c}"] = statistics.median(data[f"rps{c}"])
        figures[f"cpu{c}"] = statistics.median(data[f"cpu{c}"]) * 1e6
    return figures


def _report(results: dict[str, Any], rss: dict[str, float]) -> bool:
    rows, ratio_rows, ok = [], [], True
    for api in APIS:
        figs = {kind: _figures(results[api], kind) for kind in KINDS}
        for kind in KINDS:
            f = figs[kind]
            rows.append(
                [
                    f"{kind} {api}",
                    f["p50"],
                    f["p95"],
                    *(f[f"rps{c}"] for c in CONCURRENCY),
                    f["cpu1"],
                    *(f[f"cpu{c}"] for c in CONCURRENCY),
                    rss[f"{kind}-{api}"],
                    *(results[api][f"server{c}"] for c in CONCURRENCY),
                ]
            )
        floor, prov = figs["floor"], figs["provider"]
        checks = [
            ("latency p50 c1", prov["p50"] / floor["p50"], TARGETS["latency"], "<="),
            ("latency p95 c1", prov["p95"] / floor["p95"], None, ""),
            ("throughput c100", prov["rps100"] / floor["rps100"], None, ""),
            ("throughput c500", prov["rps500"] / floor["rps500"], TARGETS["throughput"], ">="),
            ("cpu/call c1", prov["cpu1"] / floor["cpu1"], TARGETS["cpu"], "<="),
            ("cpu/call c100", prov["cpu100"] / floor["cpu100"], TARGETS["cpu"], "<="),
            ("cpu/call c500", prov["cpu500"] / floor["cpu500"], TARGETS["cpu"], "<="),
            ("peak rss", rss[f"provider-{api}"] / rss[f"floor-{api}"], None, ""),
        ]
        for name, ratio, target, op in checks:
            verdict = wanted = ""
            if target is not None:
                passed = ratio <= target if op == "<=" else ratio >= target
                ok = ok and passed
                verdict, wanted = ("ok" if passed else "MISSED"), f"{op} {target:.2f}"
            ratio_rows.append([api, name, f"{ratio:.3f}x", wanted, verdict])
    headers = [
        "variant",
        "p50 ms",
        "p95 ms",
        *(f"req/s c{c}" for c in CONCURRENCY),
        "cpu us/call c1",
        *(f"cpu us/call c{c}" for c in CONCURRENCY),
        "peak rss MiB",
        *(f"server cpu% c{c}" for c in CONCURRENCY),
    ]
    print_table(headers, rows, title="\nFigures (latency over all calls; others: median of rounds)")
    print_table(["api", "provider / floor", "ratio", "target", ""], ratio_rows, title="\nRatios")
    return ok


def _profile(api: str, url: str, calls: int) -> None:
    async def run() -> None:
        async with _provider(url) as llm:
            call = _provider_call(llm, api)
            await _block(call, BLOCK)
            profiler = cProfile.Profile()
            profiler.enable()
            await _block(call, calls)
            await _burst(call, max(CONCURRENCY), 2.0)
            profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(35)

    anyio.run(run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=500, help="calls at concurrency 1")
    parser.add_argument("--window", type=float, default=1.0, help="seconds measured per burst")
    parser.add_argument("--rounds", type=int, default=7, help="bursts per variant and load")
    parser.add_argument("--profile", choices=APIS, help="profile the provider instead")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:  # "compare-<api>" or "rss-<kind>-<api>"
        role, *rest = args.worker.split("-")
        if role == "compare":
            pid = args.server_pid
            coro = _compare(rest[0], args.url, args.calls, args.window, args.rounds, pid)
        else:
            coro = _rss(rest[0], rest[1], args.url, args.window)
        print(json.dumps(anyio.run(lambda: coro)))
        return 0

    with MockServerProcess(["--reply-text", REPLY, "--chunks", str(CHUNKS)]) as server:
        if args.profile:
            _profile(args.profile, server.url, args.calls)
            return 0
        print(
            f"mock server {server.url} (pid {server.pid}); reply {len(REPLY)} chars in {CHUNKS}"
            f" chunks; {args.calls} calls per variant at c1; {args.rounds} windows of"
            f" {args.window:g} s per variant and load"
        )
        common = ["--url", server.url, "--server-pid", str(server.pid)]
        common += ["--calls", str(args.calls), "--window", str(args.window)]
        common += ["--rounds", str(args.rounds)]
        started = time.perf_counter()
        results = {}
        for api in APIS:
            results[api] = run_worker(__file__, ["--worker", f"compare-{api}", *common])
            print(f"{api}: compared ({time.perf_counter() - started:.0f} s)")
        rss = {}
        for api in APIS:
            for kind in KINDS:
                worker = f"rss-{kind}-{api}"
                rss[f"{kind}-{api}"] = run_worker(__file__, ["--worker", worker, *common])["rss"]
        print(f"peak RSS measured ({time.perf_counter() - started:.0f} s)")
    ok = _report(results, rss)
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
