"""Sandbox cost: PyRepl cold start and warm ``1+1`` sandboxed vs not; a sandboxed tool call vs a
plain one. Prints figures and ratios (targets: cold start <= 1.3x, warm round trip <= 1.1x).

Sandboxed tool calls are served by a warm worker (a child forked per call); the first call of a
policy starts the worker. Figures measured on this project's machine are in ``docs/sandbox.md``.

Run: ``python benchmarks/bench_sandbox.py [rounds]``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time

import anyio

from simplellmfunc import PyRepl
from simplellmfunc.sandbox import SandboxPolicy, isolation
from simplellmfunc.tools import sandboxed, tool


@tool
def plain_add(a: int, b: int) -> int:
    """Add."""
    return a + b


@sandboxed(SandboxPolicy())
def sandboxed_add(a: int, b: int) -> int:
    """Add."""
    return a + b


async def _repl(sandbox: bool, warm_calls: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as logs:
        started = time.perf_counter()
        async with PyRepl(log_dir=logs, sandbox=sandbox) as repl:
            cold = time.perf_counter() - started
            await repl.execute("1+1")
            times = []
            for _ in range(warm_calls):
                t = time.perf_counter()
                await repl.execute("1+1")
                times.append(time.perf_counter() - t)
    return cold, statistics.median(times)


async def main(rounds: int) -> None:
    print(f"bwrap: {isolation().binary or 'unavailable: ' + isolation().reason}")
    figures: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(rounds):
        for sandbox in (False, True):
            figures[sandbox].append(await _repl(sandbox, 20))
    cold = {s: statistics.median(c for c, _ in f) for s, f in figures.items()}
    warm = {s: statistics.median(w for _, w in f) for s, f in figures.items()}
    print(f"PyRepl cold start : plain {cold[False]:.3f} s, sandboxed {cold[True]:.3f} s, "
          f"ratio {cold[True] / cold[False]:.2f}x (target <= 1.3x)")  # fmt: skip
    ratio = warm[True] / warm[False]
    print(f"PyRepl warm 1+1   : plain {warm[False] * 1e3:.1f} ms, sandboxed "
          f"{warm[True] * 1e3:.1f} ms, ratio {ratio:.2f}x (target <= 1.1x)")  # fmt: skip
    started = time.perf_counter()
    await sandboxed_add.invoke({"a": 1, "b": 2})
    first = time.perf_counter() - started
    plain, boxed = [], []
    for _ in range(5 * rounds):
        t = time.perf_counter()
        await plain_add.invoke({"a": 1, "b": 2})
        plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        await sandboxed_add.invoke({"a": 1, "b": 2})
        boxed.append(time.perf_counter() - t)
    await sandboxed_add.aclose()
    p, b = statistics.median(plain), statistics.median(boxed)
    print(f"tool call         : plain {p * 1e3:.2f} ms, sandboxed {b * 1e3:.1f} ms warm "
          f"(a child forked by the warm worker), {first:.2f} s for the first call "
          "(the worker starts)")  # fmt: skip


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 3)
