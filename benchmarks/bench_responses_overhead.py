"""What OpenAIResponsesCompatible costs over raw httpx, against the mock server's ``/v1/responses``
in a separate process.

Per API, two variants:

- floor ``complete``: ``httpx.AsyncClient.post`` + ``response.json()``; floor ``stream``:
  ``client.stream("POST")``, iterate raw chunks, split lines, ``json.loads`` each ``data:`` line
  (every Responses event: created, item added, text deltas, ..., completed);
- ``OpenAIResponsesCompatible.complete`` / ``.stream`` (every event consumed).

Floor and provider send the same body with the same key header through clients with the same
limits and timeouts. Each round is a fresh worker process that warms both up, then alternates
floor and provider calls (ABBA) at concurrency 1, timing each call's latency and CPU seconds
(``time.process_time``). Alternating makes both variants share whatever else the machine is doing,
so the ratios hold on a busy box; the reported ratio is the median over rounds.

Targets (issue 6, as for the chat-completions adapter): latency p50 <= 1.10x the floor and CPU per
call <= 1.25x the floor.

Usage::

    python benchmarks/bench_responses_overhead.py [--rounds 3] [--calls 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
from _common import MockServerProcess, cpu_seconds, print_table, run_worker, summarize

from simplellmfunc._messages import UserMessage
from simplellmfunc.providers import FinishEvent, LLMRequest
from simplellmfunc.providers._responses import OpenAIResponsesCompatible

APIS = ("complete", "stream")
KEY = "sk-bench-0000000000000000000000000000"
MODEL = "gpt-5-mini"
PROMPT = "Say hello."
REPLY = "Hello! " * 30  # 210 characters
CHUNKS = 16
MAX_CONNECTIONS = 1000
TIMEOUT = httpx.Timeout(120.0, connect=10.0, pool=600.0)  # what the provider builds
TARGETS = {"latency": 1.10, "cpu": 1.25}

Call = Callable[[], Awaitable[object]]


def _floor_body(stream: bool) -> dict[str, Any]:
    """Exactly the body OpenAIResponsesCompatible sends."""
    content = [{"type": "input_text", "text": PROMPT}]
    body: dict[str, Any] = {
        "model": MODEL,
        "input": [{"type": "message", "role": "user", "content": content}],
    }
    if stream:
        body["stream"] = True
    return body


def _floor_calls(client: httpx.AsyncClient, url: str) -> tuple[Call, Call]:
    headers = {"authorization": f"Bearer {KEY}"}
    endpoint = f"{url}/responses"
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
                    if line.startswith(b"data: "):
                        events.append(json.loads(line[6:]))
        assert events[-1]["type"] == "response.completed"
        return events

    return complete, stream


def _provider_calls(llm: OpenAIResponsesCompatible) -> tuple[Call, Call]:
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


async def _paired(floor: Call, provider: Call, calls: int) -> dict[str, dict[str, float]]:
    """Alternate floor and provider calls (ABBA order), timing each call on its own.

    Both variants see the same machine at the same moment, so load from other processes (a
    shared CI box) shifts both alike and the ratios stay meaningful.
    """
    samples: dict[str, tuple[list[float], list[float]]] = {
        "floor": ([], []),
        "provider": ([], []),
    }
    pairs = (("floor", floor), ("provider", provider))
    for n in range(calls):
        for name, call in pairs if n % 2 == 0 else pairs[::-1]:
            wall, cpu = time.perf_counter(), cpu_seconds()
            await call()
            samples[name][1].append(cpu_seconds() - cpu)
            samples[name][0].append(time.perf_counter() - wall)
    result = {}
    for name, (walls, cpus) in samples.items():
        stats = summarize(walls)
        result[name] = {
            "p50": stats.median,
            "p95": stats.p95,
            "cpu": statistics.median(cpus),
            "cpu_mean": statistics.fmean(cpus),
        }
    return result


async def _worker(api: str, url: str, calls: int) -> dict[str, dict[str, float]]:
    limits = httpx.Limits(
        max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS
    )
    async with (
        httpx.AsyncClient(limits=limits, timeout=TIMEOUT) as client,
        OpenAIResponsesCompatible(KEY, MODEL, url, max_connections=MAX_CONNECTIONS) as llm,
    ):
        index = 0 if api == "complete" else 1
        floor, provider = _floor_calls(client, url)[index], _provider_calls(llm)[index]
        for _ in range(50):  # warm up: imports, caches, the keep-alive connections
            await floor()
            await provider()
        return await _paired(floor, provider, calls)


FIGURES = (("p50", 1000, "p50 ms"), ("p95", 1000, "p95 ms"), ("cpu", 1e6, "cpu us/call"))


def _report(results: dict[str, list[dict[str, dict[str, float]]]]) -> bool:
    """Print figures and ratios: per round, then the median round of each ratio."""
    rows = []
    for api, rounds in results.items():
        for n, result in enumerate(rounds):
            for variant in ("floor", "provider"):
                figures = result[variant]
                cells = [figures[key] * scale for key, scale, _ in FIGURES]
                rows.append([f"{variant}-{api}", n + 1, *cells, figures["cpu_mean"] * 1e6])
    headers = ["variant", "round", *(label for *_, label in FIGURES), "cpu us/call (mean)"]
    print_table(headers, rows, title="\nFigures (calls alternate floor / provider)")
    ok = True
    ratio_rows = []
    for api, rounds in results.items():
        checks = [
            ("latency p50", "p50", TARGETS["latency"]),
            ("latency p95", "p95", None),
            ("cpu/call (median)", "cpu", TARGETS["cpu"]),
            ("cpu/call (mean)", "cpu_mean", None),
        ]
        for name, key, target in checks:
            ratio = statistics.median(r["provider"][key] / r["floor"][key] for r in rounds)
            verdict = ""
            if target is not None:
                ok = ok and ratio <= target
                verdict = "ok" if ratio <= target else "MISSED"
            wanted = f"<= {target:.2f}" if target is not None else ""
            ratio_rows.append([api, name, f"{ratio:.3f}x", wanted, verdict])
    print_table(
        ["api", "provider / floor (median of rounds)", "ratio", "target", ""],
        ratio_rows,
        title="\nRatios (OpenAIResponsesCompatible / raw httpx)",
    )
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (fresh processes) per API")
    parser.add_argument("--calls", type=int, default=500, help="calls per variant and round")
    parser.add_argument("--worker", choices=APIS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        print(json.dumps(anyio.run(_worker, args.worker, args.url, args.calls)))
        return 0

    with MockServerProcess(["--reply-text", REPLY, "--chunks", str(CHUNKS)]) as server:
        print(
            f"mock server {server.url}/responses (pid {server.pid}); reply {len(REPLY)} chars in"
            f" {CHUNKS} deltas; {args.calls} calls per variant, {args.rounds} rounds"
        )
        results: dict[str, list[dict[str, dict[str, float]]]] = {api: [] for api in APIS}
        started = time.perf_counter()
        for round_ in range(args.rounds):
            for api in APIS:
                worker_args = ["--worker", api, "--url", server.url, "--calls", str(args.calls)]
                results[api].append(run_worker(__file__, worker_args))
            print(f"round {round_ + 1}/{args.rounds} done ({time.perf_counter() - started:.0f} s)")
    ok = _report(results)
    print("\nall targets met" if ok else "\nsome targets MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
