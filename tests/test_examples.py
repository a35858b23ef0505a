"""Every offline example runs cleanly (they script the mock server themselves)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

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


async def test_demo_runs_against_a_provider_from_the_environment(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    """`make demo` with a provider configured: the typed result, then a turn with a tool call."""
    mock_server.script(
        Reply.text('{"sentiment": "positive", "stars": 5}'),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Paris"})),
        Reply.text("It is 14°C with rain showers in Paris."),
    )
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-test-123456789",
        "OPENAI_MODEL": "mock-model",
        "OPENAI_BASE_URL": mock_server.url,
    }
    result = await anyio.run_process(
        [sys.executable, str(EXAMPLES / "demo.py")], cwd=tmp_path, env=env, check=False
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert "Review(sentiment='positive', stars=5)" in out
    assert "→ get_weather({'city': 'Paris'})" in out
    assert "← get_weather: 'Paris: 14°C, rain showers' (ok)" in out
    assert "assistant> It is 14°C with rain showers in Paris." in out
    assert "sk-test-123456789" not in out
