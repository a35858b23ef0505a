"""Shared helpers of the benchmarks: the mock server as a process, workers, CPU, RSS, tables.

Every benchmark measures a floor in the same run (e.g. raw httpx against the same server) and
prints ratios to it, so figures from a busy or slow machine still compare like with like.

Typical use (benchmark scripts run as ``python benchmarks/bench_x.py``, so ``_common`` is
importable by its bare name)::

    from _common import MockServerProcess, measure, print_table, run_worker, summarize

    with MockServerProcess(["--reply-text", "hello", "--chunks", "8"]) as server:
        ...  # point clients at server.url; server.cpu_seconds() tells its CPU use

    with measure() as m:
        ...  # m.wall, m.cpu after the block (this process only)
    stats = summarize(latencies)  # .median, .p95, .p99, .mean, .minimum
    result = run_worker(__file__, ["--worker", "x"])  # the JSON a fresh process printed last
    print_table(["variant", "p50 ms"], [["floor", 1.2]])

Run a benchmark's variants in fresh processes (:func:`run_worker`) when their memory or CPU must
not mix: ``ru_maxrss`` is a per-process peak, and caches warmed by one variant would flatter the
next.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import resource
import selectors
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import psutil

__all__ = [
    "Measurement",
    "MockServerProcess",
    "Stats",
    "cpu_seconds",
    "engine_extract",
    "floor_extract",
    "floor_post",
    "floor_react",
    "fmt",
    "measure",
    "peak_rss_mb",
    "percentile",
    "person_model",
    "pin",
    "print_table",
    "rss_sampler",
    "run_worker",
    "summarize",
]

BENCH_DIR = Path(__file__).resolve().parent
READY_TIMEOUT = 30.0


class MockServerProcess:
    """``python -m simplellmfunc.testing.mock_server`` in a child process.

    The server prints ``READY <url>`` once it listens; :attr:`url` is that base URL (with
    ``/v1``). Leaving the ``with`` block sends SIGINT and waits (then kills, if it must).

    Args:
        args: Extra command-line flags (``--reply-text``, ``--chunks``, ``--ttft``, ...; see
            ``python -m simplellmfunc.testing.mock_server --help``).
        python: The interpreter (default: this one).

    Raises:
        RuntimeError: If the server exits or stays silent instead of printing ``READY``.
    """

    def __init__(self, args: Sequence[str] = (), python: str = sys.executable) -> None:
        self.command = [python, "-m", "simplellmfunc.testing.mock_server", "--port", "0", *args]
        self.url = ""
        self._process: subprocess.Popen[str] | None = None
        self._ps: psutil.Process | None = None

    def __enter__(self) -> Self:
        process = subprocess.Popen(
            self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._process = process
        try:
            self.url = _read_ready(process)
        except BaseException:
            self.stop()
            raise
        self._ps = psutil.Process(process.pid)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        """The server's process id."""
        assert self._process is not None, "the server is not running"
        return self._process.pid

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server has used so far."""
        assert self._ps is not None, "the server is not running"
        times = self._ps.cpu_times()
        return float(times.user + times.system)

    def stop(self) -> None:
        """Stop the server (idempotent)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # the server's clean shutdown
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def _read_ready(process: subprocess.Popen[str]) -> str:
    """The URL from the server's ``READY <url>`` line (waiting at most ``READY_TIMEOUT``)."""
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            line = process.stdout.readline()
            if not line:
                stderr = process.stderr.read() if process.stderr else ""
                raise RuntimeError(f"mock server exited before READY: {stderr.strip()[-500:]}")
            if line.startswith("READY "):
                return line.split(" ", 1)[1].strip()
    raise RuntimeError(f"mock server did not print READY within {READY_TIMEOUT:g} s")


def pin(pid: int, core: int) -> bool:
    """Pin process ``pid`` (``0``: this one) to one core, when the machine has it; whether it
    did. Benchmarks put the server and the clients on different cores."""
    if not hasattr(os, "sched_setaffinity") or core >= (os.cpu_count() or 1):
        return False
    os.sched_setaffinity(pid, {core})
    return True


def cpu_seconds() -> float:
    """CPU seconds (user + system) used by this process so far."""
    return time.process_time()


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024 if sys.platform != "darwin" else peak / (1024 * 1024)


@dataclass
class Measurement:
    """Wall and CPU seconds of a :func:`measure` block (filled when it exits)."""

    wall: float = 0.0
    cpu: float = 0.0
    _start: tuple[float, float] = field(default=(0.0, 0.0), repr=False)


@contextmanager
def measure() -> Iterator[Measurement]:
    """Time a block: wall-clock (``perf_counter``) and this process's CPU (``process_time``)."""
    result = Measurement(_start=(time.perf_counter(), cpu_seconds()))
    try:
        yield result
    finally:
        result.wall = time.perf_counter() - result._start[0]
        result.cpu = cpu_seconds() - result._start[1]


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation, as numpy's default."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True, slots=True)
class Stats:
    """Summary of a sample (seconds in, seconds out)."""

    count: int
    median: float
    p95: float
    p99: float
    mean: float
    minimum: float


def summarize(values: Sequence[float]) -> Stats:
    """Median, p95, p99, mean and minimum of ``values``."""
    return Stats(
        len(values),
        statistics.median(values) if values else math.nan,
        percentile(values, 95),
        percentile(values, 99),
        statistics.fmean(values) if values else math.nan,
        min(values) if values else math.nan,
    )


def run_worker(script: Path | str, args: Sequence[str], timeout: float = 300) -> Any:
    """Run ``python script *args`` in a fresh process and return the JSON of its last stdout line.

    Raises:
        RuntimeError: If the worker fails or prints no JSON.
    """
    done = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {args} failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def fmt(value: float, digits: int = 2) -> str:
    """A number for a table: fixed digits, thousands separators for big ones, ``-`` for NaN."""
    if isinstance(value, float) and math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """Print an aligned plain-text table (numbers right-aligned, text left-aligned)."""
    cells = [[str(h) for h in headers]] + [
        [fmt(c) if isinstance(c, float) else str(c) for c in row] for row in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    numeric = [
        all(isinstance(row[i], int | float) for row in rows) if rows else False
        for i in range(len(headers))
    ]

    def line(row: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ).rstrip()

    if title:
        print(title)
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        print(line(row))


@contextmanager
def rss_sampler(interval: float = 0.005) -> Iterator[dict[str, float]]:
    """Sample this process's RSS every ``interval`` s in a thread; ``peak`` is the highest seen
    (bytes). Unlike ``ru_maxrss`` it can be read for one phase of a process."""
    process, result, stop = psutil.Process(), {"peak": 0.0}, threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            result["peak"] = max(result["peak"], process.memory_info().rss)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()


# -- the engine benchmarks' shared scenarios (bench_engine.py, scale.py) ------------------------

PERSON = '{"name": "Ada Lovelace", "age": 36, "email": "ada@example.com"}'
SYSTEM, USER = "You help.", "go"
Post = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def person_model() -> Any:
    """The pydantic model the typed (``@llm_function``) scenarios extract."""
    from pydantic import BaseModel

    class Person(BaseModel):
        name: str
        age: int
        email: str

    return Person


async def floor_post(client: Any, body: dict[str, Any]) -> dict[str, Any]:
    """POST one chat completion on a raw ``httpx.AsyncClient``; the reply's message."""
    response = await client.post("/chat/completions", content=json.dumps(body))
    response.raise_for_status()
    message: dict[str, Any] = response.json()["choices"][0]["message"]
    return message


async def _noop_tool() -> str:
    """The floor's trivial tool of a parallel batch."""
    return "done"


def floor_react(post: Post, tool: str = "noop", nap: float = 0.0) -> Callable[[], Awaitable[str]]:
    """A hand-written ReAct turn: post, run the tool calls (each sleeps ``nap``), repeat."""
    spec = {"type": "object", "properties": {}}
    tools = [
        {"type": "function", "function": {"name": tool, "description": "", "parameters": spec}}
    ]

    async def turn() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER},
        ]
        while True:
            message = await post({"model": "bench", "messages": messages, "tools": tools})
            calls = message.get("tool_calls") or []
            messages.append(
                {"role": "assistant", "content": message["content"], "tool_calls": calls}
            )
            if not calls:
                return str(message["content"])
            if nap:
                await asyncio.gather(*(asyncio.sleep(nap) for _ in calls))
            elif len(calls) > 1:  # a parallel batch: the tools run concurrently
                await asyncio.gather(*(_noop_tool() for _ in calls))
            messages += [
                {"role": "tool", "tool_call_id": c["id"], "content": "done"} for c in calls
            ]

    return turn


def floor_extract(post: Post) -> Callable[[], Awaitable[Any]]:
    """A hand-written typed call: the body ``@llm_function`` sends, the reply validated."""
    person = person_model()
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "result", "schema": person.model_json_schema(), "strict": False},
    }

    async def extract() -> Any:
        body = {
            "model": "bench",
            "messages": [
                {"role": "system", "content": "Extract the person."},
                {"role": "user", "content": "text (str): Ada Lovelace, 36, ada@example.com\n"},
            ],
            "response_format": response_format,
        }
        message = await post(body)
        return person.model_validate_json(message["content"])

    return extract


def engine_extract(llm: Any) -> Callable[[], Awaitable[Any]]:
    """The same typed call through ``@llm_function``."""
    from simplellmfunc import llm_function

    async def extract(text: str) -> Any:
        """Extract the person."""

    extract.__annotations__["return"] = person_model()
    function = llm_function(llm)(extract)
    return lambda: function("Ada Lovelace, 36, ada@example.com")
