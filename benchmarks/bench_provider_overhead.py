"""What OpenAICompatible costs over raw httpx, against the mock server in a separate process.

Four variants, each run in a fresh worker process (so peak RSS and warmed caches do not mix):

- ``floor complete``: ``httpx.AsyncClient.post`` + ``response.json()``;
- ``floor stream``: ``client.stream("POST")``, iterate raw chunks, split SSE lines, ``json.loads``
  each data line;
- ``OpenAICompatible.complete`` and ``OpenAICompatible.stream`` (every event consumed).

Floor and provider send the same body with the same API key header, through clients with the
same ``httpx.Limits`` and timeouts. Each worker warms up, then measures latency at concurrency 1,
throughput at each concurrency (after a warm-up burst that opens that many connections), its
CPU seconds per call (``time.process_time``) and its peak RSS. Variants run in interleaved
rounds and the best round of each figure is kept, which filters out noise from other processes.

Targets (issue 2): latency <= 1.10x the floor at concurrency 1; throughput >= 0.9x the floor at
concurrency 500; CPU per call <= 1.25x the floor.

Usage::

    python benchmarks/bench_provider_overhead.py [--rounds 3] [--calls 500]
    python benchmarks/bench_provider_overhead.py --profile stream   # cProfile of the provider
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import psutil
from _common import (
    MockServerProcess,
    measure,
    peak_rss_mb,
    print_table,
    run_worker,
    summarize,
)

from simplellmfunc._messages import UserMessage
from simplellmfunc.providers import FinishEvent, LLMRequest, OpenAICompatible

VARIANTS = ("floor-complete", "provider-complete", "floor-stream", "provider-stream")
CONCURRENCY = (100, 500)
KEY = "sk-bench-0000000000000000000000000000"
MODEL = "gpt-4o-mini"
PROMPT = "Say hello."
REPLY = "Hello! " * 30  # 210 characters
CHUNKS = 16
MAX_CONNECTIONS = 1000
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


def _floor_calls(client: httpx.AsyncClient, url: str) -> tuple[Call, Call]:
    headers = {"authorization": f"Bearer {KEY}"}
    endpoint = f"{url}/chat/completions"
    complete_body, stream_body = _floor_body(False), _floor_body(True)

    async def complete() -> object:
        response = await client.post(endpoint, json=complete_body, headers=headers)
        response.raise_for_status()
        return response.json()

    async def stream() -> object:
        events = []
        async with client.stream("POST", endpoint, json=stream_body, headers=headers) as response:
            response.raise_for_status()
            buffer = b""
            async for chunk in response.aiter_raw():
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: ") and line != b"data: [DONE]":
                        events.append(json.loads(line[6:]))
        return events

    return complete, stream


def _provider_calls(llm: OpenAICompatible) -> tuple[Call, Call]:
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

    return complete, stream


# -- the worker ----------------------------------------------------------------------------------


async def _latency(call: Call, calls: int) -> dict[str, float]:
    latencies = []
    with measure() as m:
        for _ in range(calls):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)
    stats = summarize(latencies)
    return {"p50": stats.median, "p95": stats.p95, "cpu_per_call": m.cpu / calls}


async def _throughput(
    call: Call, concurrency: int, calls: int, server: psutil.Process
) -> dict[str, float]:
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    server_cpu = sum(server.cpu_times()[:2])
    with measure() as m:
        async with anyio.create_task_group() as group:
            for _ in range(concurrency):
                group.start_soon(worker)
    server_cpu = sum(server.cpu_times()[:2]) - server_cpu
    return {
        "rps": calls / m.wall,
        "cpu_per_call": m.cpu / calls,
        "server_cpu_pct": 100 * server_cpu / m.wall,
    }


async def _worker(variant: str, url: str, calls: int, throughput_calls: int, pid: int) -> dict:
    server = psutil.Process(pid)
    limits = httpx.Limits(
        max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
    )
    async with (
        httpx.AsyncClient(limits=limits, timeout=TIMEOUT) as client,
        OpenAICompatible(KEY, MODEL, url, max_connections=MAX_CONNECTIONS) as llm,
    ):
        kind, api = variant.split("-")
        pair = _floor_calls(client, url) if kind == "floor" else _provider_calls(llm)
        call = pair[0] if api == "complete" else pair[1]
        for _ in range(50):  # warm up: imports, caches, the first connection
            await call()
        result: dict[str, Any] = {"variant": variant, "latency": await _latency(call, calls)}
        for concurrency in CONCURRENCY:
            # Open this load's connections first: the figure is the keep-alive steady state.
            await _throughput(call, concurrency, concurrency, server)
            total = max(throughput_calls, 4 * concurrency)
            result[f"c{concurrency}"] = await _throughput(call, concurrency, total, server)
    result["peak_rss_mb"] = peak_rss_mb()
    return result


# -- the report ----------------------------------------------------------------------------------


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The best round of each figure (lowest latency and CPU, highest throughput)."""
    best: dict[str, Any] = {
        "p50": min(r["latency"]["p50"] for r in runs),
        "p95": min(r["latency"]["p95"] for r in runs),
        "cpu": min(r["latency"]["cpu_per_call"] for r in runs),
        "rss": min(r["peak_rss_mb"] for r in runs),
    }
    for c in CONCURRENCY:
        best[f"rps{c}"] = max(r[f"c{c}"]["rps"] for r in runs)
        best[f"cpu{c}"] = min(r[f"c{c}"]["cpu_per_call"] for r in runs)
        best[f"server{c}"] = max(r[f"c{c}"]["server_cpu_pct"] for r in runs)
    return best


def _report(results: dict[str, list[dict[str, Any]]]) -> bool:
    best = {variant: _best(runs) for variant, runs in results.items()}
    rows = []
    for variant in VARIANTS:
        b = best[variant]
        rows.append(
            [
                variant,
                b["p50"] * 1000,
                b["p95"] * 1000,
                *(b[f"rps{c}"] for c in CONCURRENCY),
                b["cpu"] * 1e6,
                *(b[f"cpu{c}"] * 1e6 for c in CONCURRENCY),
                b["rss"],
                *(b[f"server{c}"] for c in CONCURRENCY),
            ]
        )
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
    print_table(headers, rows, title="\nFigures (best of rounds)")

    ok = True
    ratio_rows = []
    for api in ("complete", "stream"):
        floor, provider = best[f"floor-{api}"], best[f"provider-{api}"]
        checks = [
            ("latency p50 c1", provider["p50"] / floor["p50"], TARGETS["latency"], "<="),
            ("latency p95 c1", provider["p95"] / floor["p95"], None, ""),
            ("throughput c100", provider["rps100"] / floor["rps100"], None, ""),
            ("throughput c500", provider["rps500"] / floor["rps500"], TARGETS["throughput"], ">="),
            ("cpu/call c1", provider["cpu"] / floor["cpu"], TARGETS["cpu"], "<="),
            ("cpu/call c500", provider["cpu500"] / floor["cpu500"], TARGETS["cpu"], "<="),
            ("peak rss", provider["rss"] / floor["rss"], None, ""),
        ]
        for name, ratio, target, op in checks:
            verdict = ""
            if target is not None:
                passed = ratio <= target if op == "<=" else ratio >= target
                ok = ok and passed
                verdict = "ok" if passed else "MISSED"
            wanted = f"{op} {target:.2f}" if target is not None else ""
            ratio_rows.append([api, name, f"{ratio:.3f}x", wanted, verdict])
    print_table(
        ["api", "provider / floor", "ratio", "target", ""],
        ratio_rows,
        title="\nRatios (OpenAICompatible / raw httpx)",
    )
    return ok


def _profile(api: str, url: str, pid: int, calls: int) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(_worker, f"provider-{api}", url, calls, calls * 4, pid)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(35)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds per variant")
    parser.add_argument("--calls", type=int, default=500, help="calls at concurrency 1")
    parser.add_argument("--throughput-calls", type=int, default=2000, help="calls per load")
    parser.add_argument("--profile", choices=("complete", "stream"), help="profile the provider")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        result = anyio.run(
            _worker, args.worker, args.url, args.calls, args.throughput_calls, args.server_pid
        )
        print(json.dumps(result))
        return 0

    server_args = ["--reply-text", REPLY, "--chunks", str(CHUNKS)]
    with MockServerProcess(server_args) as server:
        if args.profile:
            _profile(args.profile, server.url, server.pid, args.calls)
            return 0
        print(
            f"mock server {server.url} (pid {server.pid}); reply {len(REPLY)} chars in {CHUNKS}"
            f" chunks; {args.calls} calls at c1, {args.throughput_calls} per load;"
            f" {args.rounds} rounds"
        )
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        started = time.perf_counter()
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                worker_args = [
                    "--worker", variant, "--url", server.url, "--server-pid", str(server.pid),
                    "--calls", str(args.calls), "--throughput-calls", str(args.throughput_calls),
                ]  # fmt: skip
                results[variant].append(run_worker(__file__, worker_args))
            print(f"round {round_ + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)")
    ok = _report(results)
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
