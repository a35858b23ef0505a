"""Every offline example runs cleanly (they script the mock server themselves)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
OFFLINE = ["typed_function", "chat_with_tools", "streaming_events", "abort", "parallel_tools"]


@pytest.mark.parametrize("name", OFFLINE)
def test_example_runs(name: str) -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()
