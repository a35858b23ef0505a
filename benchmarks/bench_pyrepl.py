"""PyRepl speed and footprint, against raw jupyter_client on the same machine in the same run.

Measures: kernel cold start (PyRepl vs a bare AsyncKernelManager), the warm ``execute("1+1")``
round trip against ``AsyncKernelClient.execute_interactive`` on the same kind of kernel (wall
and client CPU; target: within 1.15x, issue 19), kernel RSS, 16 instances running 20 cells
each at once (wall time, failures), 64 concurrent PyRepl sessions (p50 / p99 cell latency,
failures) and how soon a PyRepl taking a kernel from a warm KernelPool is ready (target:
under 10 ms).

Usage::

    python benchmarks/bench_pyrepl.py [--only warm_execute pool_ready ...] [--sessions 64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import psutil
from jupyter_client.manager import AsyncKernelManager

from simplellmfunc.builtin import KernelPool, PyRepl

WARM_CALLS = 300
INSTANCES = 16
CELLS = 20
SESSIONS = 64  # concurrent PyRepl sessions (each its own kernel)
SESSION_CELLS = 10
STARTING_AT_ONCE = 8  # kernels starting at once when the 64 sessions come up
POOL_READY_TARGET_MS = 10.0
WARM_TARGET = 1.15
LOGS = tempfile.mkdtemp(prefix="bench-pyrepl-logs-")


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    start = time.perf_counter()
    await call()
    return time.perf_counter() - start


async def raw_kernel() -> tuple[Any, Any]:
    """A bare kernel configured like PyRepl's (IPC sockets, no history database)."""
    directory = tempfile.mkdtemp(prefix="bench-raw-", dir=LOGS)
    km = AsyncKernelManager(
        kernel_name="python3",
        transport="ipc",
        ip=os.path.join(directory, "ipc"),
        connection_file=os.path.join(directory, "kernel.json"),
    )
    await km.start_kernel(
        extra_arguments=["--HistoryManager.enabled=False"],
        env={**os.environ, "IPYTHONDIR": os.path.join(directory, "ipython")},
    )
    client = km.client()
    client.start_channels()
    await client.wait_for_ready(timeout=60)
    return km, client


async def minimal_round_trip(client: Any) -> None:
    """The floor: send execute_request, read IOPub until idle, read the reply; nothing else."""
    msg_id = client.execute("1+1")
    while True:
        msg = await client.get_iopub_msg()
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    while (await client.get_shell_msg())["parent_header"].get("msg_id") != msg_id:
        pass


async def cold_start(rows: list[tuple[str, str, str]]) -> None:
    ours, raw = [], []
    for _ in range(3):
        repl = PyRepl(log_dir=LOGS)
        ours.append(await timed(repl.start))
        await repl.close()
        start = time.perf_counter()
        km, client = await raw_kernel()
        raw.append(time.perf_counter() - start)
        client.stop_channels()
        await km.shutdown_kernel(now=True)
    ours_s, raw_s = statistics.median(ours), statistics.median(raw)
    rows.append(("cold start (median of 3)", f"{ours_s * 1000:.0f} ms", f"{ours_s / raw_s:.2f}x"))
    rows.append(("  raw AsyncKernelManager start", f"{raw_s * 1000:.0f} ms", "1.00x"))


def tree_memory(pid: int) -> tuple[int, int]:
    """RSS and USS of a process and its descendants: a sandboxed kernel is the grandchild of
    the ``bwrap`` process PyRepl starts, which alone holds almost nothing."""
    root = psutil.Process(pid)
    rss = uss = 0
    for process in (root, *root.children(recursive=True)):
        try:
            rss += process.memory_info().rss
            uss += process.memory_full_info().uss
        except psutil.NoSuchProcess:
            continue
    return rss, uss


async def warm_execute(rows: list[tuple[str, str, str]]) -> None:
    km, client = await raw_kernel()
    async with PyRepl(log_dir=LOGS) as repl:
        for _ in range(20):
            await repl.execute("1+1")
            await client.execute_interactive("1+1", output_hook=lambda msg: None)
        ours, raw, floor = [], [], []
        cpu = {"ours": 0.0, "raw": 0.0}
        # Interleaved so that all three see the same machine load.
        for _ in range(WARM_CALLS):
            started = time.process_time()
            ours.append(await timed(lambda: repl.execute("1+1")))
            cpu["ours"] += time.process_time() - started
            started = time.process_time()
            raw.append(
                await timed(lambda: client.execute_interactive("1+1", output_hook=lambda m: None))
            )
            cpu["raw"] += time.process_time() - started
            floor.append(await timed(lambda: minimal_round_trip(client)))
        session = repl._kernel.session
        rss, uss = tree_memory(session.pid) if session else (0, 0)
        raw_rss, raw_uss = tree_memory(km.provisioner.pid) if km.provisioner else (0, 0)
    client.stop_channels()
    await km.shutdown_kernel(now=True)
    ours_ms, raw_ms = statistics.median(ours) * 1000, statistics.median(raw) * 1000
    rows.append(
        (f"warm execute('1+1') (median of {WARM_CALLS})", f"{ours_ms:.2f} ms",
         f"{ours_ms / raw_ms:.2f}x (target <= {WARM_TARGET:.2f}x)")
    )  # fmt: skip
    rows.append(("  raw execute_interactive", f"{raw_ms:.2f} ms", "1.00x"))
    ours_cpu, raw_cpu = cpu["ours"] / WARM_CALLS * 1e6, cpu["raw"] / WARM_CALLS * 1e6
    rows.append(
        ("  client CPU per execute ours / raw", f"{ours_cpu:.0f} / {raw_cpu:.0f} µs",
         f"{ours_cpu / raw_cpu:.2f}x")
    )  # fmt: skip
    floor_ms = statistics.median(floor) * 1000
    rows.append(
        (
            "  minimal raw round trip (floor)",
            f"{floor_ms:.2f} ms",
            f"ours {ours_ms / floor_ms:.2f}x",
        )
    )
    p90 = statistics.quantiles(ours, n=10)[-1] * 1000
    raw_p90 = statistics.quantiles(raw, n=10)[-1] * 1000
    rows.append(("  p90 ours / raw", f"{p90:.2f} / {raw_p90:.2f} ms", f"{p90 / raw_p90:.2f}x"))
    rows.append(
        ("kernel RSS / USS (ours, its process tree)", f"{rss / 2**20:.0f} / {uss / 2**20:.0f} MiB",
         f"raw kernel {raw_rss / 2**20:.0f} / {raw_uss / 2**20:.0f} MiB")
    )  # fmt: skip


async def many_instances(rows: list[tuple[str, str, str]]) -> None:
    repls = [PyRepl(log_dir=LOGS) for _ in range(INSTANCES)]
    failures: list[str] = []

    async def work(index: int, repl: PyRepl) -> None:
        for cell in range(CELLS):
            result = await repl.execute(f"value = {index} * 1000 + {cell}\nvalue * 2")
            expected = str((index * 1000 + cell) * 2)
            if not result["success"] or result["return_value"] != expected:
                failures.append(f"repl {index} cell {cell}: {result['error']}")

    try:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for repl in repls:
                tg.start_soon(repl.start)
        started = time.perf_counter() - start
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index, repl in enumerate(repls):
                tg.start_soon(work, index, repl)
        ran = time.perf_counter() - start
    finally:
        for repl in repls:
            await repl.close()
    rows.append((f"{INSTANCES} instances: start all at once", f"{started * 1000:.0f} ms", ""))
    rows.append(
        (f"{INSTANCES} x {CELLS} cells at once (wall)", f"{ran * 1000:.0f} ms",
         f"{len(failures)} failures")
    )  # fmt: skip
    for failure in failures[:5]:
        print("FAILURE:", failure, file=sys.stderr)


async def concurrent_sessions(rows: list[tuple[str, str, str]]) -> None:
    """``SESSIONS`` PyRepl sessions at once, each its own kernel, ``SESSION_CELLS`` cells each:
    the latency of every cell (p50, p99), failures."""
    repls = [PyRepl(log_dir=LOGS) for _ in range(SESSIONS)]
    starting = anyio.CapacityLimiter(STARTING_AT_ONCE)
    latencies: list[float] = []
    failures: list[str] = []

    async def start(repl: PyRepl) -> None:
        async with starting:
            await repl.start()

    async def work(index: int, repl: PyRepl) -> None:
        for cell in range(SESSION_CELLS):
            begun = time.perf_counter()
            result = await repl.execute(f"total = sum(range({index} * 100 + {cell}))\ntotal")
            latencies.append(time.perf_counter() - begun)
            expected = str(sum(range(index * 100 + cell)))
            if not result["success"] or result["return_value"] != expected:
                failures.append(f"session {index} cell {cell}: {result['error']}")

    try:
        begun = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for repl in repls:
                tg.start_soon(start, repl)
        started = time.perf_counter() - begun
        begun = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for index, repl in enumerate(repls):
                tg.start_soon(work, index, repl)
        ran = time.perf_counter() - begun
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for repl in repls:
                    tg.start_soon(repl.aclose)
    ordered = sorted(latencies)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    rows.append((f"{SESSIONS} sessions: start all ({STARTING_AT_ONCE} at once)",
                 f"{started:.1f} s", ""))  # fmt: skip
    rows.append(
        (f"{SESSIONS} x {SESSION_CELLS} cells at once: p50 / p99 cell",
         f"{p50:.0f} / {p99:.0f} ms", f"{len(failures)} failures, {ran:.1f} s wall")
    )  # fmt: skip
    for failure in failures[:5]:
        print("FAILURE:", failure, file=sys.stderr)


async def pool_ready(rows: list[tuple[str, str, str]]) -> None:
    ready, first = [], []
    async with KernelPool(size=2) as pool:
        for _ in range(5):
            await pool.wait_ready()
            repl = PyRepl(pool=pool, log_dir=LOGS)
            ready.append(await timed(repl.start))
            first.append(await timed(lambda r=repl: r.execute("1+1")))  # type: ignore[misc]
            await repl.close()
    ms = statistics.median(ready) * 1000
    rows.append(
        ("pool-warm PyRepl ready (median of 5)", f"{ms:.1f} ms",
         f"target < {POOL_READY_TARGET_MS:.0f} ms")
    )  # fmt: skip
    rows.append(("  + its first execute('1+1')", f"{statistics.median(first) * 1000:.1f} ms", ""))


STEPS = {
    step.__name__: step
    for step in (cold_start, warm_execute, many_instances, concurrent_sessions, pool_ready)
}


async def main(only: list[str]) -> None:
    rows: list[tuple[str, str, str]] = []
    print(f"load average {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)")
    for name in only or STEPS:
        await STEPS[name](rows)
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>20}  ratio / note")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>20}  {note}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], choices=list(STEPS), help="steps")
    parser.add_argument("--sessions", type=int, default=SESSIONS, help="concurrent sessions")
    args = parser.parse_args()
    SESSIONS = args.sessions
    try:
        anyio.run(main, args.only)
    finally:
        shutil.rmtree(LOGS, ignore_errors=True)
