"""Against a real model server: time to first token and total through ``@llm_chat`` vs raw httpx.

The local llama.cpp ``llama-server`` (``scripts/llama_server.py``; SmolLM2-135M) serves both
clients in the same run; they alternate call by call, send the same body (temperature 0, so the
same reply) and stream it. The figures are medians; the ratios say what the framework adds to a
call the model dominates (issue 19 target: <= 1.02x).

As in ``scale.py``, the server and the clients run on different cores (the server on core 1 with
one thread, the clients on core 0), as a model server runs on its own machine or GPU. Sharing
the cores, every microsecond of client CPU would be taken from the model's decoding, and the
ratios would measure the scheduler (they varied from 0.96x to 1.8x that way).

Usage::

    python scripts/llama_server.py build && python benchmarks/real_model.py [--calls 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _common import pin

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

SYSTEM = "You help."
PROMPT = "Name three colours of the rainbow, one per line."
PARAMS = {"temperature": 0, "max_tokens": 24, "seed": 1}
TARGET = 1.02


async def _raw(client: httpx.AsyncClient, url: str, model: str) -> tuple[float, float, str]:
    """One streamed call by hand; sent once more if llama-server closed the reused keep-alive
    connection before answering (our provider retries that case too)."""
    try:
        return await _raw_once(client, url, model)
    except httpx.RemoteProtocolError:
        return await _raw_once(client, url, model)


async def _raw_once(client: httpx.AsyncClient, url: str, model: str) -> tuple[float, float, str]:
    body = {
        "model": model,
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
        "stream": True,
        "stream_options": {"include_usage": True},
        **PARAMS,
    }
    started, first, text, buffer = time.perf_counter(), 0.0, [], b""
    async with client.stream("POST", f"{url}/chat/completions", json=body) as response:
        response.raise_for_status()
        async for chunk in response.aiter_raw():
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices", ()):
                    piece = (choice.get("delta") or {}).get("content") or ""
                    if piece and not first:
                        first = time.perf_counter() - started
                    text.append(piece)
    return first, time.perf_counter() - started, "".join(text)


def _ours(llm: Any) -> Any:
    from simplellmfunc import llm_chat

    @llm_chat(llm, stream=True)
    async def chat(message: str, history: list[dict[str, Any]]) -> None:
        """You help."""

    async def call() -> tuple[float, float, str]:
        started, first, text = time.perf_counter(), 0.0, []
        async for piece, _ in chat(PROMPT, history=[]):
            if piece and not first:
                first = time.perf_counter() - started
            text.append(piece)
        return first, time.perf_counter() - started, "".join(text)

    return call


SERVER_CORE, CLIENT_CORE = 1, 0


async def _run(calls: int) -> dict[str, Any]:
    from llama_server import llama_server, server_llm

    pinned = pin(0, SERVER_CORE)  # the server starts with this affinity
    async with llama_server(threads=1 if pinned else 2) as base:
        if pinned:
            pin(0, CLIENT_CORE)
        url = f"{base}/v1"
        llm = server_llm(base)
        llm.default_params.update(PARAMS)
        ours = _ours(llm)
        figures: dict[str, dict[str, list[float]]] = {
            name: {"ttft": [], "total": []} for name in ("raw", "ours")
        }
        async with httpx.AsyncClient(timeout=180) as client, llm:
            texts = set()
            for i in range(calls + 2):  # two warm-up rounds
                order = [("raw", None), ("ours", None)]
                for name, _ in order if i % 2 else order[::-1]:
                    if name == "raw":
                        first, total, text = await _raw(client, url, llm.model_name)
                    else:
                        first, total, text = await ours()
                    texts.add(text)
                    if i >= 2:
                        figures[name]["ttft"].append(first)
                        figures[name]["total"].append(total)
        result: dict[str, Any] = {
            name: {k: statistics.median(v) for k, v in f.items()} for name, f in figures.items()
        }
        result["same_reply"] = len(texts) == 1
        for k in ("ttft", "total"):
            result[f"{k}_ratio"] = result["ours"][k] / result["raw"][k]
        result["calls"] = calls
        result["pinned"] = pinned
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20, help="calls per client")
    parser.add_argument("--out", type=Path, help="merge the figures into this results file")
    args = parser.parse_args()
    result = asyncio.run(_run(args.calls))
    print(f"llama-server (SmolLM2-135M), {args.calls} alternating streamed calls per client")
    print(f"{'':<6} {'TTFT ms':>9} {'total ms':>9}")
    for name in ("raw", "ours"):
        r = result[name]
        print(f"{name:<6} {r['ttft'] * 1e3:>9.1f} {r['total'] * 1e3:>9.1f}")
    for k in ("ttft", "total"):
        ratio = result[f"{k}_ratio"]
        print(
            f"{k} ratio {ratio:.3f}x (target <= {TARGET}x): {'ok' if ratio <= TARGET else 'MISSED'}"
        )
    print(f"same reply from both clients: {result['same_reply']}")
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.exists() else {}
        data["real_model"] = result
        data.setdefault("ratios", {}).update(
            {"real.ttft": result["ttft_ratio"], "real.total": result["total_ratio"]}
        )
        args.out.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    main()
