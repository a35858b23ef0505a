"""``Any`` per 1,000 lines of source: the whole package, then each sub-package.

An ``Any`` is a NAME token spelled ``Any`` (annotations, casts, ``dict[str, Any]``; not words in
strings or comments); lines are physical lines of the ``.py`` files.

    python scripts/any_density.py            # src/simplellmfunc
    python scripts/any_density.py src/simplellmfunc/providers src/simplellmfunc/mcp
"""

from __future__ import annotations

import io
import sys
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "src" / "simplellmfunc"


def count(path: Path) -> tuple[int, int]:
    """(``Any`` tokens, lines) of one file."""
    text = path.read_text(encoding="utf-8")
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    anys = sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")
    return anys, text.count("\n")


def density(anys: int, lines: int) -> float:
    return 1000 * anys / lines if lines else 0.0


def main(argv: list[str]) -> None:
    roots = [Path(arg) for arg in argv] or [ROOT]
    per_group: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    total = [0, 0]
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.py"))
        for path in files:
            anys, lines = count(path)
            parts = path.resolve().relative_to(ROOT).parts
            if parts[0] == "runtime" and len(parts) > 2:
                group = f"runtime/{parts[1]}"
            else:
                group = parts[0] if len(parts) > 1 else "(top level)"
            per_group[group][0] += anys
            per_group[group][1] += lines
            total[0] += anys
            total[1] += lines
    print(f"{'package':28} {'Any':>6} {'lines':>7} {'per 1,000':>10}")
    for group, (anys, lines) in sorted(per_group.items(), key=lambda kv: -density(*kv[1])):
        print(f"{group:28} {anys:6} {lines:7} {density(anys, lines):10.1f}")
    print(f"{'total':28} {total[0]:6} {total[1]:7} {density(*total):10.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
