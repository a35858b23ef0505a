"""Sandbox cost: PyRepl cold start and warm ``1+1`` sandboxed vs not; a sandboxed tool call vs a
plain one; and, with ``--baseline REF``, the same sandboxed figures of the code at git ``REF``
measured in the same run (the hardening's cost as ratios: after / before).

Sandboxed tool calls are served by a warm worker (each call in a child forked ahead of it); the
first call of a policy starts the worker. ``--tools-only`` measures only the tool calls: p50 of
back-to-back calls (a plain call between two), and its ratio to the plain (unsandboxed) floor,
and p50 of calls 30 ms apart (as a model's calls come: something else runs between them).
With ``--baseline`` the rounds interleave (before, after, before, ...), and each figure is the
median of the rounds' medians. Figures measured on this project's machine are in
``docs/sandbox.md``.

Run: ``python benchmarks/bench_sandbox.py [rounds] [--baseline REF] [--tools-only]``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from simplellmfunc import PyRepl
from simplellmfunc.sandbox import SandboxPolicy, isolation
from simplellmfunc.tools import sandboxed, tool

ROOT = Path(__file__).resolve().parents[1]
SPACING = 0.03  # seconds between the spaced calls (a model's turn is far longer)


@tool
def plain_add(a: int, b: int) -> int:
    """Add."""
    return a + b


@sandboxed(SandboxPolicy(timeout_seconds=60))
def sandboxed_add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def _repl(sandbox: bool, warm_calls: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as logs:
        started = time.perf_counter()
        async with PyRepl(log_dir=logs, sandbox=sandbox) as repl:
            await repl.execute("1+1")
            cold = time.perf_counter() - started
            times = []
            for _ in range(warm_calls):
                t = time.perf_counter()
                await repl.execute("1+1")
                times.append(time.perf_counter() - t)
    return cold, statistics.median(times)


async def measure(rounds: int, plain: bool, kernels: bool = True) -> dict[str, float]:
    """Medians in seconds: kernel cold start and warm 1+1, tool first and warm call."""
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(rounds if kernels else 0):
        for sandbox in (False, True) if plain else (True,):
            figures[sandbox].append(await _repl(sandbox, 10))
    out = {}
    for sandbox, found in figures.items():
        if found:
            name = "sandboxed" if sandbox else "plain"
            out[f"kernel_cold_{name}"] = statistics.median(c for c, _ in found)
            out[f"kernel_warm_{name}"] = statistics.median(w for _, w in found)
    started = time.perf_counter()
    await sandboxed_add.invoke({"a": 1, "b": 2})
    out["tool_first_sandboxed"] = time.perf_counter() - started
    times, plain_times = [], []
    for _ in range(5 * rounds if kernels else 30 * rounds):
        t = time.perf_counter()
        await sandboxed_add.invoke({"a": 1, "b": 2})
        times.append(time.perf_counter() - t)
        t = time.perf_counter()
        await plain_add.invoke({"a": 1, "b": 2})
        plain_times.append(time.perf_counter() - t)
    spaced = []
    for _ in range(0 if kernels else 10 * rounds):  # calls with something else between them
        await anyio.sleep(SPACING)
        t = time.perf_counter()
        await sandboxed_add.invoke({"a": 1, "b": 2})
        spaced.append(time.perf_counter() - t)
    await sandboxed_add.aclose()
    if spaced:
        out["tool_spaced_sandboxed"] = statistics.median(spaced)
    out["tool_warm_sandboxed"] = statistics.median(times)
    out["tool_warm_plain"] = statistics.median(plain_times)
    return out


def _baseline(ref: str, rounds: int) -> dict[str, float]:
    """The sandboxed figures of the code at ``ref`` (its ``src`` extracted to a temp dir)."""
    with tempfile.TemporaryDirectory(prefix="slf-bench-") as folder:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "src"],
                                 capture_output=True, check=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        env = {**os.environ, "PYTHONPATH": os.path.join(folder, "src")}
        extra = ["--tools-only"] if "--tools-only" in sys.argv else []
        done = subprocess.run(
            [sys.executable, __file__, str(rounds), "--json", *extra], env=env, cwd=folder,
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> None:
    args = sys.argv[1:]
    rounds = int(args[0]) if args and args[0].isdigit() else 3
    kernels = "--tools-only" not in args
    if "--json" in args:
        print(json.dumps(anyio.run(measure, rounds, False, kernels)))
        return
    print(f"bwrap: {isolation().binary or 'unavailable: ' + isolation().reason}")
    ref = args[args.index("--baseline") + 1] if "--baseline" in args else None
    befores: list[dict[str, float]] = []
    afters: list[dict[str, float]] = []
    for _ in range(rounds if ref else 1):  # interleaved: the load changes between rounds
        if ref:
            befores.append(_baseline(ref, 1))
        afters.append(anyio.run(measure, 1 if ref else rounds, True, kernels))
    before = {k: statistics.median(b[k] for b in befores) for k in befores[0]} if ref else {}
    after = {k: statistics.median(a[k] for a in afters) for k in afters[0]}
    floor = after["tool_warm_plain"]
    print(f"tool call p50     : sandboxed {after['tool_warm_sandboxed'] * 1e3:.2f} ms, plain floor "
          f"{floor * 1e3:.3f} ms, ratio {after['tool_warm_sandboxed'] / floor:.1f}x")  # fmt: skip
    for name, value in before.items():
        print(f"before ({name:<20}): {value * 1e3:8.2f} ms, after {after[name] * 1e3:8.2f} ms, "
              f"ratio {after[name] / value:.2f}x")  # fmt: skip
    if "tool_spaced_sandboxed" in after:
        print(f"tool call, spaced : sandboxed {after['tool_spaced_sandboxed'] * 1e3:.2f} ms p50 "
              f"(calls {SPACING * 1e3:.0f} ms apart)")  # fmt: skip
    if not kernels:
        return
    cold, warm = after["kernel_cold_sandboxed"], after["kernel_warm_sandboxed"]
    print(f"PyRepl cold start : plain {after['kernel_cold_plain']:.3f} s, sandboxed {cold:.3f} s, "
          f"ratio {cold / after['kernel_cold_plain']:.2f}x")  # fmt: skip
    print(f"PyRepl warm 1+1   : plain {after['kernel_warm_plain'] * 1e3:.1f} ms, sandboxed "
          f"{warm * 1e3:.1f} ms, ratio {warm / after['kernel_warm_plain']:.2f}x")  # fmt: skip
    print(
        f"tool call         : plain {after['tool_warm_plain'] * 1e3:.2f} ms, sandboxed "
        f"{after['tool_warm_sandboxed'] * 1e3:.1f} ms warm, "
        f"{after['tool_first_sandboxed']:.2f} s for the first call (the worker starts)"
    )


if __name__ == "__main__":
    main()
