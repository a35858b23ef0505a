"""Durable runs on DBOS: steps recorded, a SIGKILLed run resumed without repeating a call."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from durable.support import child, log_lines
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")

GUARD = 60


def _sqlite(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'durable.sqlite'}"


async def test_sigkill_mid_run_resumes_from_the_last_recorded_step(
    mock_server: MockLLMServer, tmp_path: Path
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("record", {"label": "a"})),
        Reply.tool_calls(
            ToolCallSpec("hang", {"label": "b"}), ToolCallSpec("charge", {"amount": 5})
        ),
        Reply.text("done"),
    )
    db = _sqlite(tmp_path)

    with anyio.fail_after(GUARD):
        async with child("start", db, mock_server.url, tmp_path) as (process, lines):
            await lines.until("blocked")
            await lines.until("blocked")  # hang and charge both started, neither finished
            process.kill()
            await process.wait()
        assert len(mock_server.requests) == 2
        async with child("resume", db, mock_server.url, tmp_path) as (process, lines):
            result = await lines.result()
            assert await process.wait() == 0
    assert result["text"] == "done"
    assert result["resumed"] is True
    # The two LLM calls and the record call were recorded: replayed, not made again.
    assert len(mock_server.requests) == 3
    assert result["replayed"] == 3
    assert len(log_lines(tmp_path, "record")) == 1
    # The idempotent call cut by the kill ran again (at least once) ...
    assert len(log_lines(tmp_path, "hang")) == 2
    # ... the non-idempotent one did not: the model was told it was interrupted.
    assert len(log_lines(tmp_path, "charge")) == 1
    last = json.dumps(mock_server.requests[-1].json)
    assert "was interrupted by a restart" in last
    assert "Python (PyRepl) kernel is new" in last
