"""What the OpenAI-compatible endpoint costs: a streamed turn through ``simplellmfunc serve``'s
``/v1/chat/completions`` (the official ``openai`` client -> the served agent -> the mock LLM
server) against the same agent called directly in this process, in the same run.

Processes: the mock LLM server (a child), the served app under uvicorn (a child, serving an
``@llm_chat`` agent on the mock), and this process, which drives both variants alternately
(ABBA) at concurrency 1:

- ``direct``: ``async for item in agent("hi", history=[])`` (``stream=True``,
  ``enable_event=True``), every event consumed;
- ``endpoint``: ``client.chat.completions.create(..., stream=True)``, every chunk consumed.

Per turn: the time to the first text chunk (TTFC) and the whole turn's wall time; CPU seconds of
this process (``direct``: the agent; ``endpoint``: the openai client) and, for the endpoint, of
the serving process (psutil). The ratios are endpoint / direct: TTFC, and the CPU of a turn
(client + server) over the agent's own.

Usage::

    python benchmarks/bench_openai_path.py [--turns 200] [--chunks 16]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import openai
import psutil
from _common import MockServerProcess, cpu_seconds, print_table, summarize

from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc._events import EventYield, LLMChunkArriveEvent

KEY = "sk-bench-0000000000000000000000000000"
TOKEN = "bench-token-000000"
REPLY = "Hello! " * 30  # 210 characters

Turn = Callable[[], Awaitable[tuple[float, float]]]


def _agent(llm: Any) -> Any:
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You are a helper."""

    return llm_chat(llm, stream=True, enable_event=True)(helper)


async def _serve(upstream: str) -> None:
    """The serving child: print ``READY <url>``, serve until SIGINT."""
    from simplellmfunc.serving import ServedAgent, create_app, serve_app

    async with OpenAICompatible(KEY, "mock-model", upstream) as llm:
        served = ServedAgent(_agent(llm))

        def announce(url: str) -> None:
            print(f"READY {url}/v1", flush=True)

        await serve_app(
            lambda url: create_app(served, url, token=TOKEN, a2a=False),
            "127.0.0.1",
            0,
            before_shutdown=served.stop,
            announce=announce,
        )


def _direct(agent: Any) -> Turn:
    async def turn() -> tuple[float, float]:
        started = time.perf_counter()
        first = 0.0
        text = []
        async for item in agent("hi", history=[]):
            event = item.event if isinstance(item, EventYield) else None
            if isinstance(event, LLMChunkArriveEvent) and event.text:
                first = first or time.perf_counter() - started
                text.append(event.text)
        assert "".join(text) == REPLY
        return first, time.perf_counter() - started

    return turn


def _endpoint(client: openai.AsyncOpenAI) -> Turn:
    messages: Any = [{"role": "user", "content": "hi"}]

    async def turn() -> tuple[float, float]:
        started = time.perf_counter()
        first = 0.0
        text = []
        stream = await client.chat.completions.create(
            model="helper", messages=messages, stream=True
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                first = first or time.perf_counter() - started
                text.append(chunk.choices[0].delta.content)
        assert "".join(text) == REPLY
        return first, time.perf_counter() - started

    return turn


async def _run(turns: int, chunks: int) -> None:
    mock_args = ["--reply-text", REPLY, "--chunks", str(chunks)]
    with MockServerProcess(mock_args) as mock:
        serving = MockServerProcess()
        serving.command = [sys.executable, __file__, "--serve", mock.url]
        with serving:
            server = psutil.Process(serving.pid)
            async with OpenAICompatible(KEY, "mock-model", mock.url) as llm:
                client = openai.AsyncOpenAI(api_key=TOKEN, base_url=serving.url, max_retries=0)
                variants = {"direct": _direct(_agent(llm)), "endpoint": _endpoint(client)}
                for turn in variants.values():  # warm up both
                    for _ in range(5):
                        await turn()
                samples: dict[str, dict[str, list[float]]] = {
                    name: {"ttfc": [], "wall": [], "cpu": [], "server": []} for name in variants
                }
                order = list(variants.items())
                for n in range(turns):
                    for name, turn in order if n % 2 == 0 else order[::-1]:
                        cpu, server_cpu = cpu_seconds(), _cpu(server)
                        first, wall = await turn()
                        got = samples[name]
                        got["cpu"].append(cpu_seconds() - cpu)
                        got["server"].append(_cpu(server) - server_cpu)
                        got["ttfc"].append(first)
                        got["wall"].append(wall)
                await client.close()
    _report(samples, turns, chunks)


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _report(samples: dict[str, dict[str, list[float]]], turns: int, chunks: int) -> None:
    direct, endpoint = samples["direct"], samples["endpoint"]
    d_cpu = statistics.fmean(direct["cpu"])
    e_client = statistics.fmean(endpoint["cpu"])
    e_server = statistics.fmean(endpoint["server"])
    d_ttfc, e_ttfc = summarize(direct["ttfc"]).median, summarize(endpoint["ttfc"]).median
    d_wall, e_wall = summarize(direct["wall"]).median, summarize(endpoint["wall"]).median
    ms = 1000.0
    rows = [
        ["direct (agent)", d_ttfc * ms, d_wall * ms, d_cpu * ms, "-", d_cpu * ms],
        [
            "endpoint (openai client)",
            e_ttfc * ms,
            e_wall * ms,
            e_client * ms,
            e_server * ms,
            (e_client + e_server) * ms,
        ],
    ]
    print_table(
        ["variant", "TTFC p50 ms", "turn p50 ms", "client CPU ms", "server CPU ms", "CPU ms"],
        [[r[0], *(x if isinstance(x, str) else f"{x:.2f}" for x in r[1:])] for r in rows],
        title=f"streamed turn, {len(REPLY)} chars in {chunks} chunks, {turns} turns per variant",
    )
    print(
        f"ratios endpoint / direct: TTFC {e_ttfc / d_ttfc:.2f}x, turn {e_wall / d_wall:.2f}x, "
        f"client CPU {e_client / d_cpu:.2f}x, client + server CPU "
        f"{(e_client + e_server) / d_cpu:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--serve", metavar="UPSTREAM", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        anyio.run(_serve, args.serve)
        return
    anyio.run(_run, args.turns, args.chunks)


if __name__ == "__main__":
    main()
