"""input() in PyRepl: answered through events, unanswered (idle timeout), and without consumer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import psutil
import pytest
import pytest_asyncio

from simplellmfunc._events import CustomEvent
from simplellmfunc.builtin import PyRepl
from simplellmfunc.tools import ToolEventEmitter

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def children_before() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def repl(
    tmp_path_factory: pytest.TempPathFactory, children_before: set[int]
) -> AsyncIterator[PyRepl]:
    logs = tmp_path_factory.mktemp("logs")
    async with PyRepl(
        log_dir=logs, execution_timeout_seconds=2, input_idle_timeout_seconds=1
    ) as shared:
        yield shared
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left, f"orphan processes: {left}"


def answering(repl: PyRepl, answers: list[str], seen: list[CustomEvent]) -> ToolEventEmitter:
    """An emitter whose live consumer answers input requests from ``answers``."""

    async def sink(event: CustomEvent) -> None:
        seen.append(event)
        if event.event_name == "kernel_input_request" and answers:
            assert repl.submit_input(event.data["request_id"], answers.pop(0))

    return ToolEventEmitter(tool_name="execute_code", sink=sink)


async def test_input_answered_through_events(repl: PyRepl) -> None:
    seen: list[CustomEvent] = []
    code = "name = input('Name: ')\nage = int(input('Age: '))\nprint(f'{name} is {age}')"
    result = await repl.execute(code, event_emitter=answering(repl, ["Ada", "36"], seen))
    assert result["success"], result
    assert result["stdout"].endswith("Ada is 36\n")
    assert "Name: Ada" in result["stdout"]
    requests = [e.data for e in seen if e.event_name == "kernel_input_request"]
    assert [r["prompt"] for r in requests] == ["Name: ", "Age: "]
    assert all(len(r["request_id"]) == 32 for r in requests)
    assert (await repl.execute("name, age"))["return_value"] == "('Ada', 36)"


async def test_waiting_for_input_does_not_count_and_answers_restart_the_window(
    repl: PyRepl,
) -> None:
    # Active time before each input is 1.2 s: under the 2 s limit only if every answer
    # restarts the window; the slow consumer's waiting is not counted at all.
    async def slow_sink(event: CustomEvent) -> None:
        if event.event_name == "kernel_input_request":
            await anyio.sleep(0.5)
            repl.submit_input(event.data["request_id"], "ok")

    emitter = ToolEventEmitter(sink=slow_sink)
    code = "import time\nfor _ in range(2):\n    time.sleep(1.2)\n    input()\nprint('done')"
    result = await repl.execute(code, event_emitter=emitter)
    assert result["success"], result
    assert result["stdout"].endswith("done\n")


async def test_unanswered_input_times_out(repl: PyRepl) -> None:
    seen: list[CustomEvent] = []
    await repl.execute("kept = 'still here'")
    result = await repl.execute(
        "input('never answered: ')", event_emitter=answering(repl, [], seen)
    )
    assert result["success"] is False
    assert result["error_details"]["error_type"] == "InputTimeoutError"
    assert result["error"] == "Input request timed out after 1 seconds"
    stale = next(e for e in seen if e.event_name == "kernel_input_request")
    assert repl.submit_input(stale.data["request_id"], "too late") is False
    assert (await repl.execute("kept"))["return_value"] == "'still here'"


@pytest.mark.parametrize(
    "emitter", [None, ToolEventEmitter(live=False)], ids=["no-emitter", "not-read"]
)
async def test_input_without_consumer_fails_fast(repl: PyRepl, emitter: Any) -> None:
    result = await repl.execute("value = input('x? ')", event_emitter=emitter)
    assert result["success"] is False
    assert "StdinNotImplementedError" in result["error_details"]["error_type"]
    assert "no event consumer" in result["error"]
