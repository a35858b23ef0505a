"""Cassette replay speed, and the overhead of an evaluation per case, in one process.

- ``live``: ``calls`` calls of an ``@llm_function`` against the in-process mock server (the floor
  the other figures are compared with, from the same run).
- ``record``: the same calls under a cassette in ``record`` mode (every exchange kept, the file
  written at the end).
- ``replay``: the same calls answered by the cassette (``none`` mode: no server at all); calls
  per second, and as a ratio to ``live``.
- ``direct`` vs ``evaluate``: the function called once per case in a loop, and
  ``evaluate(function, dataset, concurrency=1)`` with an ``Equals`` evaluator over the same
  cases; the overhead per case is the difference per case, and the ratio of the two.

Usage::

    python benchmarks/bench_replay.py [--calls 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from _common import print_table

from simplellmfunc import OpenAICompatible, llm_function
from simplellmfunc.evals import Case, Dataset, Equals, evaluate
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, use_cassette

KEY = "sk-bench-0123456789abcdef"


def echo(request: RecordedRequest) -> Reply:
    text = request.json["messages"][-1]["content"]
    return Reply.text(f"answer to {text.split()[-1]}", chunks=4)


def make(llm: OpenAICompatible) -> Any:
    @llm_function(llm)
    async def answer(question: str) -> str:
        """Answer the question in a few words."""

    return answer


async def _calls(llm: OpenAICompatible, count: int) -> float:
    answer = make(llm)
    start = time.perf_counter()
    for i in range(count):
        await answer(f"question {i}")
    return time.perf_counter() - start


async def main(calls: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench_replay-"))
    path = folder / "bench.jsonl"
    rows: list[list[Any]] = []
    async with MockLLMServer(default=echo, max_records=10) as server:
        url = server.url
        async with OpenAICompatible(KEY, "bench", url) as llm:
            await _calls(llm, 5)  # warm up: imports, connections
            live = await _calls(llm, calls)
            with use_cassette(path, mode="record"):
                record = await _calls(llm, calls)

            cases = [
                Case(f"c{i}", {"question": f"question {i}"}, f"answer to {i}") for i in range(calls)
            ]
            dataset = Dataset(cases, [Equals()])
            answer = make(llm)
            start = time.perf_counter()
            for case in dataset.cases:
                await answer(**case.inputs)
            direct = time.perf_counter() - start
            start = time.perf_counter()
            report = await evaluate(answer, dataset, concurrency=1)
            evaluated = time.perf_counter() - start
            assert report.pass_rate == 1.0
    async with OpenAICompatible(KEY, "bench", url) as llm:  # the server is gone
        with use_cassette(path, mode="none") as cassette:
            replay = await _calls(llm, calls)
        assert cassette.all_played
    size = path.stat().st_size
    for name, seconds in (("live (mock server)", live), ("record", record), ("replay", replay)):
        rows.append([name, calls, f"{calls / seconds:.0f}", f"{live / seconds:.2f}"])
    print(f"{calls} sequential calls; cassette {size / 1024:.0f} KiB")
    print_table(["variant", "calls", "calls/s", "speed vs live"], rows)
    per_case = (evaluated - direct) / calls * 1000
    print_table(
        ["direct ms/case", "evaluate ms/case", "overhead ms/case", "ratio"],
        [
            [
                f"{direct / calls * 1000:.2f}",
                f"{evaluated / calls * 1000:.2f}",
                f"{per_case:.2f}",
                f"{evaluated / direct:.2f}",
            ]
        ],
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    anyio.run(main, args.calls)
