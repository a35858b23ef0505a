"""The benchmark regression check: ratios that got worse by more than the threshold are flagged."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "compare_results.py"


def run(tmp_path: Path, old: dict[str, float], new: dict[str, float]) -> tuple[int, str]:
    for name, ratios in (("old", old), ("new", new)):
        (tmp_path / f"{name}.json").write_text(json.dumps({"ratios": ratios}))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "old.json"), str(tmp_path / "new.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout


def test_within_ten_percent_passes(tmp_path: Path) -> None:
    code, out = run(
        tmp_path, {"cpu.typed": 1.00, "rate.500": 1.00}, {"cpu.typed": 1.09, "rate.500": 0.91}
    )
    assert code == 0
    assert "no ratio regressed" in out


def test_cost_growing_and_throughput_shrinking_are_flagged(tmp_path: Path) -> None:
    old = {"cpu.typed": 1.00, "rate.500": 1.00, "p99.500": 1.0, "wall.stream": 1.0}
    new = {"cpu.typed": 1.12, "rate.500": 0.85, "p99.500": 0.5, "wall.stream": 1.2}
    code, out = run(tmp_path, old, new)
    assert code == 1
    flagged = {
        line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("REGRESSION")
    }
    assert flagged == {"cpu.typed", "rate.500", "wall.stream"}  # a faster p99 is no regression
