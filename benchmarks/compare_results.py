"""Compare two ``scale.py`` results files: flag ratios that regressed by more than 10 %.

Only ratios to the floor are compared (absolute times depend on the machine and its load). A
ratio where lower is better (CPU, wall, p99) regresses when it grows; throughput (``rate.*``)
regresses when it shrinks.

Usage::

    python benchmarks/compare_results.py OLD.json NEW.json [--threshold 0.10]

Exit status 1 when some ratio regressed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HIGHER_IS_BETTER = ("rate.",)


def regressions(
    old: dict[str, float], new: dict[str, float], threshold: float = 0.10
) -> list[tuple[str, float, float, float]]:
    """``(name, old, new, change)`` for every ratio in both files that got worse by more than
    ``threshold`` (a fraction: 0.10 is 10 %)."""
    found = []
    for name in sorted(old.keys() & new.keys()):
        before, after = old[name], new[name]
        if before <= 0:
            continue
        change = after / before - 1
        worse = -change if name.startswith(HIGHER_IS_BETTER) else change
        if worse > threshold:
            found.append((name, before, after, change))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--threshold", type=float, default=0.10, help="fraction (0.10: 10 %%)")
    args = parser.parse_args(argv)
    old = json.loads(args.old.read_text())["ratios"]
    new = json.loads(args.new.read_text())["ratios"]
    for name in sorted(old.keys() | new.keys()):
        a, b = (f"{r[name]:.3f}x" if name in r else "-" for r in (old, new))
        print(f"{name:<18} {a:>8} -> {b:>8}")
    found = regressions(old, new, args.threshold)
    for name, before, after, change in found:
        print(f"REGRESSION {name}: {before:.3f}x -> {after:.3f}x ({change:+.1%})")
    if not found:
        print(f"no ratio regressed by more than {args.threshold:.0%}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
