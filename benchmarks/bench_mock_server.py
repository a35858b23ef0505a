"""Capacity of the mock LLM server: requests/s, non-streaming and streaming, at concurrency 50/200.

The server runs as its own process (``python -m simplellmfunc.testing.mock_server``), as our
provider benchmarks run it. Each load runs in another process, with one of two clients:

- ``raw``: a minimal keep-alive HTTP/1.1 client on asyncio streams. It does far less work per
  request than the server, so with the server's CPU near 100 % its figure is the server's capacity.
- ``httpx``: ``httpx.AsyncClient``, the client our providers use, to show the headroom: the
  server must answer much faster than httpx can ask.

``server cpu`` is the server process's CPU use during the run (100 % = one core); ``req/s per
server core`` divides the rate by it: the capacity estimate that stays meaningful when other work
shares the machine. Usage::

    python benchmarks/bench_mock_server.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import psutil

CONCURRENCY = (50, 200)
MODES = ("non-stream", "stream")
CLIENTS = ("raw", "httpx")
REPLY_TEXT = "The quick brown fox jumps over the lazy dog, again and again."
CHUNKS = 8


def _body(mode: str) -> bytes:
    body: dict[str, Any] = {"model": "bench", "messages": [{"role": "user", "content": "hi"}]}
    if mode == "stream":
        body["stream"] = True
    return json.dumps(body).encode()


async def _raw_worker(
    host: str, port: int, body: bytes, stream: bool, deadline: float
) -> list[float]:
    reader, writer = await asyncio.open_connection(host, port)
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    latencies = []
    try:
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if stream:
                await reader.readuntil(b"\r\n0\r\n\r\n")  # our server's last chunk
            else:
                length = int(head.split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
            latencies.append(time.perf_counter() - start)
    finally:
        writer.close()
        await writer.wait_closed()
    return latencies


async def _httpx_worker(
    client: Any, url: str, body: bytes, stream: bool, deadline: float
) -> list[float]:
    headers = {"content-type": "application/json"}
    latencies = []
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        if stream:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                async for _ in response.aiter_bytes():
                    pass
        else:
            response = await client.post(url, content=body, headers=headers)
            response.read()
        latencies.append(time.perf_counter() - start)
    return latencies


async def _client(args: argparse.Namespace) -> dict[str, float]:
    """One load run; returns requests/s and latency percentiles."""
    import httpx

    body, stream = _body(args.mode), args.mode == "stream"
    host, port = args.url.split("//")[1].split("/")[0].split(":")
    start, cpu = time.perf_counter(), time.process_time()
    deadline = start + args.seconds
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        if args.client == "raw":
            jobs = [
                _raw_worker(host, int(port), body, stream, deadline)
                for _ in range(args.concurrency)
            ]
        else:
            url = f"{args.url}/chat/completions"
            jobs = [
                _httpx_worker(client, url, body, stream, deadline) for _ in range(args.concurrency)
            ]
        results = await asyncio.gather(*jobs)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    latencies = sorted(lat for worker in results for lat in worker)
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
        "client_cpu": 100 * cpu / elapsed,
    }


def _run_cell(
    server: psutil.Process, url: str, client: str, mode: str, conc: int, seconds: float
) -> dict[str, float]:
    command = [sys.executable, __file__, "--as-client", client, "--url", url]
    command += ["--mode", mode, "--concurrency", str(conc), "--seconds", str(seconds)]
    before, wall = server.cpu_times(), time.perf_counter()
    output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)
    after, wall = server.cpu_times(), time.perf_counter() - wall
    result: dict[str, float] = json.loads(output.stdout)
    busy = (after.user + after.system) - (before.user + before.system)
    result["server_cpu"] = 100 * busy / wall
    return result


HEADER = (
    f"{'client':<7} {'mode':<11} {'conc':>5} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8}"
    f" {'server cpu':>11} {'client cpu':>11} {'req/s per server core':>22}"
)


def _row(client: str, mode: str, conc: int, r: dict[str, float]) -> str:
    return (
        f"{client:<7} {mode:<11} {conc:>5} {r['rps']:>8.0f} {r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}"
        f" {r['server_cpu']:>10.0f}% {r['client_cpu']:>10.0f}%"
        f" {100 * r['rps'] / max(r['server_cpu'], 1e-9):>22.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--as-client", choices=CLIENTS)
    parser.add_argument("--url", default="")
    parser.add_argument("--mode", choices=MODES, default="non-stream")
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()
    if args.as_client:
        args.client = args.as_client
        print(json.dumps(asyncio.run(_client(args))))
        return
    command = [sys.executable, "-m", "simplellmfunc.testing.mock_server", "--port", "0"]
    command += ["--reply-text", REPLY_TEXT, "--chunks", str(CHUNKS)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            url = proc.stdout.readline().split()[1]
            server = psutil.Process(proc.pid)
            print(f"mock server {url}, reply of {len(REPLY_TEXT)} chars, stream in {CHUNKS} chunks")
            print(HEADER)
            for mode in MODES:
                for conc in CONCURRENCY:
                    for client in CLIENTS:
                        r = _run_cell(server, url, client, mode, conc, args.seconds)
                        print(_row(client, mode, conc, r), flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
