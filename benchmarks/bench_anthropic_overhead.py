"""What AnthropicCompatible costs over raw httpx, against the mock server's ``/v1/messages``.

Four variants, each run in a fresh worker process (so warmed caches do not mix):

- ``floor complete``: ``httpx.AsyncClient.post`` + ``response.json()``;
- ``floor stream``: ``client.stream("POST")``, iterate raw chunks, split SSE lines, ``json.loads``
  each data line (every Anthropic event: ``message_start``, block start / deltas / stop,
  ``message_delta``, ``message_stop``);
- ``AnthropicCompatible.complete`` and ``AnthropicCompatible.stream`` (every event consumed).

Floor and provider send the same body with the same ``x-api-key`` and ``anthropic-version``
headers, through clients with the same limits and timeouts. Each worker warms up, then measures
latency at concurrency 1 and its CPU seconds per call (``time.process_time``), and throughput at
concurrency 100 for information. Variants run in interleaved rounds; the best round of each figure
is kept, which filters out noise from other processes.

Targets (issue 6, as for the OpenAI adapter): latency <= 1.10x the floor, CPU per call <= 1.25x.

Usage::

    python benchmarks/bench_anthropic_overhead.py [--rounds 3] [--calls 400]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
from _common import MockServerProcess, measure, print_table, run_worker, summarize

from simplellmfunc._messages import UserMessage
from simplellmfunc.providers import FinishEvent, LLMRequest
from simplellmfunc.providers._anthropic import AnthropicCompatible

VARIANTS = ("floor-complete", "provider-complete", "floor-stream", "provider-stream")
KEY = "sk-ant-bench-00000000000000000000000000"
MODEL = "claude-bench"
VERSION = "2023-06-01"
PROMPT = "Say hello."
REPLY = "Hello! " * 30  # 210 characters
CHUNKS = 16
CONCURRENCY = 100
TIMEOUT = httpx.Timeout(120.0, connect=10.0, pool=600.0)  # what the provider builds
TARGETS = {"latency": 1.10, "cpu": 1.25}

Call = Callable[[], Awaitable[object]]


def _floor_calls(client: httpx.AsyncClient, url: str) -> tuple[Call, Call]:
    headers = {"x-api-key": KEY, "anthropic-version": VERSION}
    endpoint = f"{url}/messages"
    body: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    stream_body = {**body, "stream": True}

    async def complete() -> object:
        response = await client.post(endpoint, json=body, headers=headers)
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
                    if line.startswith(b"data: "):
                        events.append(json.loads(line[6:]))
        return events

    return complete, stream


def _provider_calls(llm: AnthropicCompatible) -> tuple[Call, Call]:
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


async def _latency(call: Call, calls: int) -> dict[str, float]:
    latencies = []
    with measure() as m:
        for _ in range(calls):
            start = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - start)
    stats = summarize(latencies)
    return {"p50": stats.median, "p95": stats.p95, "cpu": m.cpu / calls}


async def _throughput(call: Call, calls: int) -> float:
    remaining = calls

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await call()

    with measure() as m:
        async with anyio.create_task_group() as group:
            for _ in range(CONCURRENCY):
                group.start_soon(worker)
    return calls / m.wall


async def _worker(variant: str, url: str, calls: int) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with (
        httpx.AsyncClient(limits=limits, timeout=TIMEOUT) as client,
        AnthropicCompatible(KEY, MODEL, url) as llm,
    ):
        kind, api = variant.split("-")
        pair = _floor_calls(client, url) if kind == "floor" else _provider_calls(llm)
        call = pair[0] if api == "complete" else pair[1]
        await _throughput(call, CONCURRENCY * 2)  # warm up: imports, caches, connections
        for _ in range(50):
            await call()
        result = await _latency(call, calls)
        result["rps"] = await _throughput(call, calls * 4)
    return result


def _report(results: dict[str, list[dict[str, float]]]) -> bool:
    best = {
        variant: {
            "p50": min(r["p50"] for r in runs),
            "p95": min(r["p95"] for r in runs),
            "cpu": min(r["cpu"] for r in runs),
            "rps": max(r["rps"] for r in runs),
        }
        for variant, runs in results.items()
    }
    rows = [
        [v, b["p50"] * 1000, b["p95"] * 1000, b["cpu"] * 1e6, b["rps"]] for v, b in best.items()
    ]
    headers = ["variant", "p50 ms", "p95 ms", "cpu us/call", f"req/s c{CONCURRENCY}"]
    print_table(headers, rows, title="\nFigures (best of rounds)")
    ok = True
    ratio_rows = []
    for api in ("complete", "stream"):
        floor, provider = best[f"floor-{api}"], best[f"provider-{api}"]
        checks = [
            ("latency p50 c1", provider["p50"] / floor["p50"], TARGETS["latency"]),
            ("latency p95 c1", provider["p95"] / floor["p95"], None),
            ("cpu/call c1", provider["cpu"] / floor["cpu"], TARGETS["cpu"]),
            (f"throughput c{CONCURRENCY}", provider["rps"] / floor["rps"], None),
        ]
        for name, ratio, target in checks:
            verdict, wanted = "", ""
            if target is not None:
                passed = ratio <= target
                ok = ok and passed
                verdict, wanted = ("ok" if passed else "MISSED"), f"<= {target:.2f}"
            ratio_rows.append([api, name, f"{ratio:.3f}x", wanted, verdict])
    print_table(
        ["api", "provider / floor", "ratio", "target", ""],
        ratio_rows,
        title="\nRatios (AnthropicCompatible / raw httpx)",
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per variant")
    parser.add_argument("--calls", type=int, default=400, help="calls at concurrency 1")
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(anyio.run(_worker, args.worker, args.url, args.calls)))
        return 0

    server_args = ["--reply-text", REPLY, "--chunks", str(CHUNKS)]
    with MockServerProcess(server_args) as server:
        print(
            f"mock server {server.url}; reply {len(REPLY)} chars in {CHUNKS} chunks;"
            f" {args.calls} calls at c1; {args.rounds} rounds"
        )
        results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        started = time.perf_counter()
        for round_ in range(args.rounds):
            for variant in VARIANTS:
                worker_args = ["--worker", variant, "--url", server.url, "--calls", str(args.calls)]
                results[variant].append(run_worker(__file__, worker_args))
            print(f"round {round_ + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)")
    ok = _report(results)
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
