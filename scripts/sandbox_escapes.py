"""Render the escape table of ``docs/sandbox.md`` from the results the escape tests wrote.

``tests/test_sandbox.py`` and ``tests/test_sandbox_escapes.py`` record each attempt's outcome in
``.cache/sandbox-escapes.json``; this prints the Markdown table, or with ``--write`` replaces the
table between the ``<!-- escapes -->`` markers of ``docs/sandbox.md``.

Run: ``python -m pytest tests/test_sandbox.py tests/test_sandbox_escapes.py`` then
``python scripts/sandbox_escapes.py --write``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / ".cache" / "sandbox-escapes.json"
DOC = ROOT / "docs" / "sandbox.md"
START, END = "<!-- escapes -->", "<!-- /escapes -->"
#: Known gaps no test can show as held (kept here so the table says so).
NOT_COVERED = {
    "a kernel exploit reachable from a user namespace": "namespaces share the host kernel; "
    "the seccomp filter narrows the surface, a VM (gVisor, Firecracker) removes it",
    "total memory / CPU of a sandbox (many processes, each under its limit)": "no cgroup "
    "memory or CPU controller is set up; RLIMIT_AS and RLIMIT_CPU are per process",
    "filling the workspace with many files": "max_file_size_mb caps each file, not the sum",
    "the fallback: a command that kills its supervisor, then detaches with env -i": "without "
    "bubblewrap there is no PID namespace; the subreaper and the marker sweep are the ties",
}


def table(results: dict[str, dict[str, str]]) -> str:
    """The Markdown table of ``results`` and the known gaps."""
    lines = ["| Escape attempt | Outcome | How |", "|---|---|---|"]
    for name in sorted(results):
        row = results[name]
        lines.append(f"| {name} | {row['outcome']} | {row['how']} |")
    for name, why in NOT_COVERED.items():
        lines.append(f"| {name} | not covered | {why} |")
    return "\n".join(lines)


def main() -> None:
    rendered = table(json.loads(RESULTS.read_text()))
    if "--write" not in sys.argv[1:]:
        print(rendered)
        return
    text = DOC.read_text()
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    DOC.write_text(f"{head}{START}\n{rendered}\n{END}{tail}")


if __name__ == "__main__":
    main()
