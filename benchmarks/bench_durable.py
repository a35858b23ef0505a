"""Durable runs: the cost of recording every step, the scaling of queue workers, recovery time.

The mock LLM server runs in its own process (``--react-steps 3 --tool-name noop``): one turn is
3 LLM calls and 2 tool calls, 5 steps. Every client runs in a fresh process, so CPU time is the
client's alone (DBOS's threads included: they are part of the cost).

- overhead: client CPU per step of a durable run (SQLite file; Postgres when ``initdb`` is
  here) against the same plain run, and the ratio (issue 18's target: <= 1.5x on SQLite); and
  what durability adds per step against DBOS's own floor measured in the same run, a bare
  workflow of 5 empty public ``@DBOS.step`` steps (issue 34's target: <= 1.2x that floor);
- scaling: sessions/s with 1, 2 and 4 worker processes (``serve_queue``) on one Postgres queue;
- recovery: a durable run SIGKILLed in its first tool call, then the time a new process takes
  from its start to the run's result, and from its runtime's launch to the result.

Usage::

    python benchmarks/bench_durable.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil
from _common import MockServerProcess, fmt, print_table, run_worker

STEPS_PER_TURN = 5
TARGET_RATIO = 1.5
TARGET_FLOOR = 1.2
WORKERS = (1, 2, 4)


# -- the agent every client process runs ---------------------------------------------------------


def _agent(url: str, name: str = "bench") -> Any:
    import anyio

    from simplellmfunc import OpenAICompatible, llm_chat, tool

    @tool
    async def noop() -> str:
        """Do nothing."""
        if os.environ.get("BENCH_BLOCK") == "1":
            print("blocked", flush=True)
            await anyio.sleep_forever()
        return "ok"

    llm = OpenAICompatible("sk-bench-0123456789", "mock", url)

    @llm_chat(llm, toolkit=[noop])
    async def bench(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You help."""

    return llm, bench


def _durable(db: str, **queue: Any) -> Any:
    """The config of a client (no queue: nothing polls) or of a worker (``queue`` settings)."""
    from simplellmfunc.runtime.durable import DurableConfig, QueueConfig

    queues = (QueueConfig("bench", polling_interval=0.05, **queue),) if queue else ()
    # One application version for every process: the DBOS floor registers workflows of its
    # own, which would otherwise make its version the latest, and workers skip older ones.
    executor = os.environ.get("EXECUTOR")
    return DurableConfig(database_url=db, queues=queues, executor_id=executor, app_version="bench")


async def _turns(variant: str, url: str, db: str, turns: int) -> dict[str, float]:
    if variant in ("dbos", "dbos0"):
        return await _bare_dbos(db, turns, STEPS_PER_TURN if variant == "dbos" else 0)
    llm, bench = _agent(url)
    async with llm:
        if variant == "plain":

            async def turn(n: int) -> None:
                async for _ in bench("go", history=[]):
                    pass

            return await _timed(turn, turns)
        from simplellmfunc.runtime.durable import DurableAgent, DurableRuntime

        agent = DurableAgent(bench, name="bench")
        async with DurableRuntime(_durable(db)):

            async def durable_turn(n: int) -> None:
                await agent.run("go", history=[])

            return await _timed(durable_turn, turns)


async def _bare_dbos(db: str, turns: int, steps: int) -> dict[str, float]:
    """DBOS's own floor: a workflow of ``steps`` empty ``@DBOS.step`` steps per turn, nothing
    else (per step of a 5-step turn, like the others)."""
    from dbos import DBOS

    from simplellmfunc.runtime.durable import DurableRuntime

    @DBOS.step(name="bench.empty")
    async def empty() -> None:
        return None

    @DBOS.workflow(name="bench.empty_steps")
    async def empty_steps() -> None:
        for _ in range(steps):
            await empty()

    async with DurableRuntime(_durable(db)):

        async def turn(n: int) -> None:
            await empty_steps()

        return await _timed(turn, turns)


async def _timed(turn: Any, turns: int) -> dict[str, float]:
    await turn(-1)  # warm: imports, connections, the first statements
    cpu, wall = time.process_time(), time.perf_counter()
    for n in range(turns):
        await turn(n)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return {"cpu_step_us": cpu / turns / STEPS_PER_TURN * 1e6, "wall_turn_ms": wall / turns * 1e3}


async def _serve(url: str, db: str) -> None:
    from simplellmfunc.runtime.durable import DurableAgent, serve_queue

    llm, bench = _agent(url)
    DurableAgent(bench, name="bench")
    async with llm:
        await serve_queue(
            _durable(db, worker_concurrency=8), "bench", ready=lambda: print("ready", flush=True)
        )


async def _crash_or_recover(mode: str, url: str, db: str) -> dict[str, float]:
    from simplellmfunc.runtime.durable import DurableAgent, DurableRuntime

    started = time.perf_counter()
    llm, bench = _agent(url)
    agent = DurableAgent(bench, name="bench")
    async with llm, DurableRuntime(_durable(db)) as runtime:
        launched = time.perf_counter()
        if mode == "crash":
            await agent.run("go", history=[], workflow_id="crash-1")
        result = await runtime.result("crash-1", timeout=120)
        done = time.perf_counter()
    return {
        "launch_to_result_s": done - launched,
        "import_to_result_s": done - started,
        "replayed": result.replayed_steps,
    }


def _child(args: argparse.Namespace) -> None:
    import anyio

    if args.child == "serve":
        anyio.run(_serve, args.url, args.db)
        return
    if args.child in ("crash", "recover"):
        out = anyio.run(_crash_or_recover, args.child, args.url, args.db)
    else:
        out = anyio.run(_turns, args.child, args.url, args.db, args.turns)
    print(json.dumps(out), flush=True)


# -- the measurements ---------------------------------------------------------------------------


def _overhead(url: str, databases: dict[str, str], turns: int, rounds: int) -> list[list[Any]]:
    """Plain, durable and DBOS's own floor (empty steps) per database, alternated by round."""
    variants = {"plain": ("plain", "")}
    for name, db in databases.items():
        variants[f"durable {name}"] = ("durable", db)
        variants[f"DBOS empty workflow {name}"] = ("dbos0", db)
        variants[f"DBOS 5 empty steps {name}"] = ("dbos", db)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    for _ in range(rounds):  # alternate, so that machine noise hits every variant alike
        for name, (variant, db) in variants.items():
            runs[name].append(_run(variant, url, db, turns))
    plain = _median(runs["plain"], "cpu_step_us")
    rows = []
    for name, measured in runs.items():
        cpu = _median(measured, "cpu_step_us")
        ratio = cpu / plain
        verdict = "" if name != "durable SQLite" else ("ok" if ratio <= TARGET_RATIO else "MISSED")
        wall = _median(measured, "wall_turn_ms")
        rows.append([name, fmt(cpu, 0), fmt(ratio), fmt(wall / STEPS_PER_TURN), verdict])
    return rows


def _dbos_share(rows: list[list[Any]], databases: dict[str, str]) -> None:
    """Split the durable overhead per step: DBOS's workflow (start, status, output, result),
    spread over the turn's steps, and the rest (our steps); and compare it with DBOS's floor,
    a workflow of as many empty public steps, measured in the same run."""
    cpu = {row[0]: float(str(row[1]).replace(",", "")) for row in rows}
    for name in databases:
        overhead = cpu[f"durable {name}"] - cpu["plain"]
        workflow = cpu[f"DBOS empty workflow {name}"]
        floor = cpu[f"DBOS 5 empty steps {name}"]
        dbos_step = floor - workflow
        ratio = overhead / floor
        verdict = "ok" if ratio <= TARGET_FLOOR else "MISSED"
        print(
            f"{name}: durability adds {overhead:,.0f} µs/step; DBOS's own floor (a workflow of "
            f"5 empty public steps) is {floor:,.0f} µs/step: {ratio:.2f}x the floor "
            f"(<= {TARGET_FLOOR}x: {verdict})"
        )
        print(
            f"{name}: durability adds {overhead:,.0f} µs/step to the plain run; DBOS's workflow "
            f"alone is {workflow:,.0f} µs/step of it ({workflow / overhead:.0%}); our steps "
            f"the other {overhead - workflow:,.0f} µs/step (an empty "
            f"@DBOS.step costs {dbos_step:,.0f} µs)"
        )


def _loadavg() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _run(variant: str, url: str, db: str, turns: int) -> dict[str, float]:
    args = ["--child", variant, "--url", url, "--db", db, "--turns", str(turns)]
    result: dict[str, float] = run_worker(__file__, args)
    return result


def _median(runs: list[dict[str, float]], key: str) -> float:
    values = sorted(run[key] for run in runs)
    return values[len(values) // 2]


def _scaling(url: str, db: str, sessions: int, rounds: int) -> list[list[Any]]:
    """Sessions/s for 1, 2, 4 workers (median of ``rounds``), the workers' CPU per session
    (all of them together), and the load average."""
    import anyio

    rows = []
    base = 0.0
    for count in WORKERS:
        rates, cpus = [], []
        with ExitStack() as stack:
            workers = [
                stack.enter_context(_worker_process(url, db, f"bench-{count}-{n}"))
                for n in range(count)
            ]
            for r in range(rounds):
                before = sum(w.cpu_seconds() for w in workers)
                rates.append(anyio.run(_enqueue_all, db, sessions, f"{count}-{r}"))
                cpus.append((sum(w.cpu_seconds() for w in workers) - before) / sessions)
        rate, cpu = sorted(rates)[len(rates) // 2], sorted(cpus)[len(cpus) // 2]
        base = base or rate
        load = _loadavg().split(" ", 2)[2]
        rows.append([count, fmt(rate, 1), fmt(rate / base), fmt(cpu * 1e3, 1), load])
    return rows


class _worker_process:
    def __init__(self, url: str, db: str, executor: str) -> None:
        command = [sys.executable, __file__, "--child", "serve", "--url", url, "--db", db]
        env = {**os.environ, "EXECUTOR": executor}
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)

    def __enter__(self) -> _worker_process:
        assert self.process.stdout is not None
        while self.process.stdout.readline().strip() != "ready":
            if self.process.poll() is not None:
                raise RuntimeError("a worker exited before it was ready")
        return self

    def cpu_seconds(self) -> float:
        times = psutil.Process(self.process.pid).cpu_times()
        return float(times.user + times.system)

    def __exit__(self, *exc: object) -> None:
        self.process.kill()
        self.process.wait()


async def _enqueue_all(db: str, sessions: int, batch: str) -> float:
    from simplellmfunc.runtime.durable import DurableClient

    async with DurableClient(_durable(db)) as client:
        started = time.perf_counter()
        ids = [
            await client.enqueue("bench", "bench", "go", history=[], workflow_id=f"s-{batch}-{n}")
            for n in range(sessions)
        ]
        for workflow_id in ids:
            await client.result(workflow_id, timeout=300)
        return sessions / (time.perf_counter() - started)


def _recovery(url: str, db: str) -> list[list[Any]]:
    command = [sys.executable, __file__, "--child", "crash", "--url", url, "--db", db]
    crash = subprocess.Popen(
        command, stdout=subprocess.PIPE, text=True, env={**os.environ, "BENCH_BLOCK": "1"}
    )
    assert crash.stdout is not None
    while crash.stdout.readline().strip() != "blocked":
        if crash.poll() is not None:
            raise RuntimeError("the run to crash exited early")
    crash.kill()
    crash.wait()
    started = time.perf_counter()
    out = run_worker(__file__, ["--child", "recover", "--url", url, "--db", db])
    total = time.perf_counter() - started
    return [
        ["process start to result", fmt(total, 2)],
        ["runtime launch to result", fmt(out["launch_to_result_s"], 2)],
        ["steps replayed", out["replayed"]],
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns and sessions")
    parser.add_argument(
        "--only", choices=["overhead", "scaling", "recovery"], help="measure one part only"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--db", default="", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=40, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; 1 quick)")
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    from simplellmfunc.testing import postgres_cluster, postgres_missing

    turns, rounds, sessions = (10, 1, 16) if args.quick else (40, 3, 48)
    rounds = args.rounds or rounds
    missing = postgres_missing()
    wanted = {args.only} if args.only else {"overhead", "scaling", "recovery"}
    with (
        MockServerProcess(["--react-steps", "3", "--tool-name", "noop"]) as server,
        tempfile.TemporaryDirectory() as folder,
        ExitStack() as stack,
    ):
        databases = {"SQLite": f"sqlite:///{Path(folder) / 'durable.sqlite'}"}
        needs_postgres = not missing and wanted & {"overhead", "scaling"}
        postgres = stack.enter_context(postgres_cluster()) if needs_postgres else None
        if postgres:
            databases["Postgres"] = postgres
        if "overhead" in wanted:
            print(f"mock server in its own process; {rounds} rounds x {turns} turns of 5 steps")
            rows = _overhead(server.url, databases, turns, rounds)
            headers = ["variant", "CPU/step µs", "x plain", "wall/step ms", f"<= {TARGET_RATIO}x"]
            title = f"client CPU per step (median of the rounds; {_loadavg()})"
            print_table(headers, rows, title)
            _dbos_share(rows, databases)
        if "scaling" in wanted and postgres is None:
            print(f"no Postgres ({missing}): no scaling figures")
        elif "scaling" in wanted:
            scaling = _scaling(server.url, postgres, sessions, rounds)
            title = f"{sessions} sessions (3 LLM calls each) on one Postgres queue"
            headers = ["workers", "sessions/s", "x 1 worker", "worker CPU ms/session", "load avg"]
            print_table(headers, scaling, title)
        if "recovery" in wanted:
            recovery_db = f"sqlite:///{Path(folder) / 'recovery.sqlite'}"
            rows = _recovery(server.url, recovery_db)
            print_table([f"recovery after SIGKILL (SQLite; {_loadavg()})", "s"], rows)


if __name__ == "__main__":
    main()
