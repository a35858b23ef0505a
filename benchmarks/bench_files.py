"""FileToolset speed: ``grep`` against ``grep -rnE`` on the same tree, and ranged reads.

Builds a tree of 5,000 files / ~50 MB in a temp dir (ASCII source-like text, a few UTF-8
files, some binaries, ignored directories), then prints a table of median wall times.
Target: the grep tool within 3x of ``grep -rnE`` in the same run.
"""

from __future__ import annotations

import functools
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from simplellmfunc.builtin import FileToolset

FILES = 5_000
TOTAL_BYTES = 50 * 1024 * 1024
PLANTED = 150  # matching lines: below the 200-match cap, so both tools scan the whole tree
REPEATS = 5
WORDS = (
    *("self", "return", "import", "value", "result", "config", "handler", "request"),
    *("response", "client", "server", "token", "index", "buffer", "stream", "event"),
    *("queue", "worker", "thread", "cache", "parse", "render", "update", "create", "delete"),
)


def _line_pool(rng: random.Random) -> list[str]:
    pool = []
    for _ in range(4000):
        indent = " " * (4 * rng.randrange(4))
        words = rng.choices(WORDS, k=rng.randrange(3, 12))
        pool.append(f"{indent}{words[0]}_{rng.randrange(999)} = {'.'.join(words[1:])}()\n")
    return pool


def build_tree(root: Path) -> None:
    """Write the benchmark tree under ``root``."""
    rng = random.Random(1234)
    pool = _line_pool(rng)
    per_file = TOTAL_BYTES // FILES
    planted = set(rng.sample(range(FILES), PLANTED))
    for i in range(FILES):
        folder = root / f"pkg{i % 50:02d}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        size = 0
        while size < per_file:
            line = rng.choice(pool)
            lines.append(line)
            size += len(line)
        if i in planted:
            lines.insert(rng.randrange(len(lines)), f"    marker = needle_{i}x  # planted\n")
        if i % 97 == 0:
            lines.append("    label = 'naïve café — ünïcode'\n")
        data = "".join(lines).encode()
        if i % 500 == 0:
            data = b"\x00\x01binary" + data
        (folder / f"mod{i}.py").write_bytes(data)
    (root / ".git").mkdir()
    (root / ".git" / "pack.py").write_text("needle_0x\n" * 1000)


def _median(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def time_sync(fn: Callable[[], object]) -> float:
    """Median milliseconds of ``fn()`` over REPEATS runs."""
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return _median(samples)


async def time_async(fn: Callable[[], Awaitable[object]], repeats: int = REPEATS) -> float:
    """Median milliseconds of ``await fn()``."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return _median(samples)


async def bench_grep(root: Path, rows: list[tuple[str, str]]) -> None:
    """Compare the grep tool with GNU grep for a few patterns."""
    tools = {t.name: t for t in FileToolset(root).toolset}
    grep = tools["grep"]
    gnu = shutil.which("grep")
    for label, pattern in [
        ("literal", "needle_[0-9]+x"),
        ("regex", r"marker = needle_[0-9]{2,}x +#"),
        ("no match", "zebra[0-9]+quux"),
    ]:
        summary = (await grep(pattern=pattern, path_pattern="**")).splitlines()[0]
        ours = await time_async(functools.partial(grep, pattern=pattern, path_pattern="**"))
        rows.append((f"grep tool, {label}: {summary.split(' (')[0]}", f"{ours:8.1f} ms"))
        if gnu is None:
            continue
        cmd = [gnu, "-rnE", pattern, str(root)]
        ref = time_sync(functools.partial(subprocess.run, cmd, capture_output=True, check=False))
        rows.append((f"grep -rnE, {label}", f"{ref:8.1f} ms"))
        rows.append((f"ratio tool / grep -rnE, {label}", f"{ours / ref:8.2f} x"))


async def bench_read(root: Path, rows: list[tuple[str, str]]) -> None:
    """Ranged reads of a 100,000-line file."""
    big = root / "big.txt"
    big.write_text(
        "".join(f"{i:06d} an ordinary line of text to read back\n" for i in range(100_000))
    )
    read = {t.name: t for t in FileToolset(root).toolset}["read_file"]
    rng = random.Random(5)
    starts = [rng.randrange(1, 99_900) for _ in range(50)]
    it = iter(starts * 2)

    async def one_range() -> object:
        s = next(it)
        return await read(path="big.txt", start_line=s, end_line=s + 99)

    ms = await time_async(one_range, repeats=50)
    size = big.stat().st_size >> 20
    rows.append((f"read_file 100-line range, 100k-line file ({size} MB)", f"{ms:8.2f} ms"))
    ms = await time_async(lambda: read(path="big.txt", start_line=98_001, end_line=100_000))
    rows.append(("read_file 2,000-line range at the end", f"{ms:8.2f} ms"))


async def main() -> None:
    """Build the tree, run the benchmarks, print the table."""
    with tempfile.TemporaryDirectory(prefix="bench-files-") as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        build_tree(root)
        built = time.perf_counter() - start
        rows: list[tuple[str, str]] = [
            ("tree", f"{FILES} files, {TOTAL_BYTES >> 20} MB (built in {built:.1f} s)")
        ]
        await bench_grep(root, rows)
        await bench_read(root, rows)
    width = max(len(name) for name, _ in rows)
    print(f"{'benchmark':<{width}}  value")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    sys.exit(anyio.run(main))
