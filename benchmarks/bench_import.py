"""Import cost: ``import simplellmfunc`` and the first use of the common names, in fresh
interpreters, against the floor of a bare ``python -c pass`` measured in the same run.

Run: ``python benchmarks/bench_import.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys

from _common import print_table

RUNS = 7
CASES = {
    "python -c pass (floor)": "pass",
    "import simplellmfunc": "import simplellmfunc",
    "+ llm_chat, llm_function": "from simplellmfunc import llm_chat, llm_function",
    "+ OpenAICompatible": "from simplellmfunc import llm_chat, OpenAICompatible",
    "+ PyRepl (jupyter_client)": "from simplellmfunc import PyRepl",
}
TIMER = "import time; _t = time.perf_counter(); {code}; print(time.perf_counter() - _t)"


def seconds(code: str) -> float:
    """Median in-process import time of ``code`` over fresh interpreters."""
    runs = [
        float(subprocess.run([sys.executable, "-c", TIMER.format(code=code)],
                             capture_output=True, text=True, check=True).stdout)
        for _ in range(RUNS)
    ]  # fmt: skip
    return statistics.median(runs)


def main() -> None:
    rows = [[name, f"{seconds(code) * 1000:.1f}"] for name, code in CASES.items()]
    print(f"median of {RUNS} fresh interpreters (target: import simplellmfunc well under 300 ms)")
    print_table(["what", "ms"], rows)


if __name__ == "__main__":
    main()
