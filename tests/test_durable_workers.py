"""Distributed durable runs: worker processes share a queue on a real Postgres; a SIGKILLed
worker's sessions are finished by another, each from its last recorded step."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from durable.support import child, log_lines, session_reply
from simplellmfunc.testing import MockLLMServer

pytest.importorskip("dbos", reason="durable runs need the [durable] extra (dbos)")

from simplellmfunc.runtime.durable import DurableClient, DurableConfig

GUARD = 90


async def test_a_killed_workers_sessions_are_finished_by_another(
    postgres: str, tmp_path: Path
) -> None:
    labels = [f"s{n}" for n in range(4)]
    async with MockLLMServer(default=session_reply("hang")) as server:
        config = DurableConfig(database_url=postgres)
        with anyio.fail_after(GUARD):
            async with (
                child(
                    "worker",
                    postgres,
                    server.url,
                    tmp_path,
                    "sessions",
                    env={"DURABLE_BLOCK": "1", "DURABLE_EXECUTOR": "worker-a"},
                ) as (worker_a, lines_a),
                DurableClient(config) as client,
            ):
                await lines_a.until("ready")
                ids = [
                    await client.enqueue("sessions", "clerk", label, history=[]) for label in labels
                ]
                # worker_concurrency=2: worker A takes two sessions and blocks in both.
                await lines_a.until("blocked")
                await lines_a.until("blocked")
                async with child(
                    "worker",
                    postgres,
                    server.url,
                    tmp_path,
                    "sessions",
                    env={"DURABLE_EXECUTOR": "worker-b"},
                ) as (_worker_b, lines_b):
                    await lines_b.until("ready")
                    worker_a.kill()
                    await worker_a.wait()
                    results = [await client.result(i, timeout=60) for i in ids]
    assert sorted(r.text for r in results) == [f"done {label}" for label in labels]
    resumed = [r for r in results if r.resumed]
    assert len(resumed) == 2  # A's two sessions, resumed by B
    assert all(r.replayed_steps == 1 for r in resumed)  # their first LLM call was not repeated
    assert len(server.requests) == 2 * len(labels)
    hangs = log_lines(tmp_path, "hang")
    assert len(hangs) == len(labels) + 2  # A's two calls cut by the kill ran again, in B
    assert len({line.split()[1] for line in hangs}) == 2  # in two processes
    notes = [r for r in server.requests if "kernel is new" in json.dumps(r.json)]
    assert len(notes) == 2  # the resumed sessions' models were told
