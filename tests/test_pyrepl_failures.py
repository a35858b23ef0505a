"""PyRepl when things go wrong: timeouts, unkillable cells, kernel death, abort, cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from simplellmfunc import AbortSignal
from simplellmfunc.builtin import PyRepl
from simplellmfunc.builtin.pyrepl._reaper import live_count
from simplellmfunc.exceptions import ArgumentValueError, KernelError
from simplellmfunc.tools import ToolEventEmitter


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"orphan processes: {left}"
    assert live_count() == 0


@pytest.fixture
async def repl(tmp_path: Path) -> AsyncIterator[PyRepl]:
    async with PyRepl(
        tmp_path, execution_timeout_seconds=1, interrupt_grace_seconds=1, log_dir=tmp_path / "logs"
    ) as repl:
        yield repl


async def test_timeout_interrupts_and_keeps_state(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    result = await repl.execute(
        "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.01)"
    )
    assert result["success"] is False
    assert result["error_details"]["error_type"] == "TimeoutError"
    assert "timed out after 1 s" in result["error"]
    assert "variables and imports are kept" in result["error"]
    assert "interrupted at line 4" in result["error"]
    assert result["stdout"] == "started\n"
    after = await repl.execute("kept")
    assert after["return_value"] == "'yes'"
    assert after["notice"] is None


async def test_timeout_that_ignores_interrupt_restarts_the_kernel(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
    result = await repl.execute(code)
    assert result["success"] is False
    assert "was restarted: all variables and imports were lost" in result["error"]
    after = await repl.execute("'kept' in globals()")
    assert after["return_value"] == "False"
    assert "fresh Python kernel" in after["notice"]
    assert (await repl.execute("1"))["notice"] is None


IGNORES_INTERRUPTS = (
    "import signal, time\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)"
)


async def cancel_when_ready(repl: PyRepl, code: str) -> None:
    """Run ``code`` and cancel the caller as soon as it printed ``ready`` (the engine's
    ``tool_timeout`` path: a cancel scope around the tool call)."""
    ready = anyio.Event()

    async def sink(event: Any) -> None:
        if "ready" in str(event.data.get("text", "")):
            ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(partial(repl.execute, code, event_emitter=ToolEventEmitter(sink=sink)))
        with anyio.fail_after(30):
            await ready.wait()
        tg.cancel_scope.cancel()


async def test_cancelled_cell_that_ignores_interrupts_is_noticed(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    await cancel_when_ready(repl, IGNORES_INTERRUPTS)
    after = await repl.execute("'kept' in globals()")
    assert after["return_value"] == "False"
    assert "fresh Python kernel" in after["notice"]
    assert "cancelled" in after["notice"]
    assert (await repl.execute("1"))["notice"] is None


async def test_cancelled_cell_that_stops_keeps_state_without_notice(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    await cancel_when_ready(repl, "import time\nprint('ready', flush=True)\ntime.sleep(60)")
    after = await repl.execute("kept")
    assert after["return_value"] == "'yes'"
    assert after["notice"] is None


async def test_cancelled_cell_leaves_no_partial_output_file(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    async with PyRepl(tmp_path, max_capture_chars=10_000, log_dir=logs) as repl:
        code = "import time\nprint('x' * 1_500_000)\nprint('ready', flush=True)\ntime.sleep(60)"
        await cancel_when_ready(repl, code)
        assert (await repl.execute("1"))["return_value"] == "1"
    assert not list(logs.rglob("outputs/*"))


async def test_restart_is_noticed_once(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    await repl.restart()
    after = await repl.execute("'kept' in globals()")
    assert after["return_value"] == "False"
    assert "restarted" in after["notice"]
    assert (await repl.execute("1"))["notice"] is None


async def test_kernel_death_then_fresh_kernel(repl: PyRepl) -> None:
    await repl.execute("kept = 1")
    result = await repl.execute("import os\nos._exit(3)")
    assert result["success"] is False
    assert result["error_details"]["error_type"] == "KernelDiedError"
    assert "kernel died" in result["error"]
    assert "exit code 3" in result["error"]
    after = await repl.execute("'kept' in globals()")
    assert after["success"]
    assert after["return_value"] == "False"
    assert "died" in after["notice"]


@pytest.mark.parametrize(
    ("code", "signal_name"),
    [
        ("import ctypes\nctypes.string_at(0)", "SIGSEGV"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "SIGKILL"),  # as the OOM killer
    ],
)
async def test_death_by_signal_is_reported(repl: PyRepl, code: str, signal_name: str) -> None:
    result = await repl.execute(code)
    assert result["success"] is False
    assert f"killed by signal {signal_name}" in result["error"]


async def test_exit_between_executions_gives_a_fresh_kernel(repl: PyRepl) -> None:
    # A background thread ends the kernel after the cell has finished.
    code = "import os, threading\nkept = 1\nthreading.Timer(0.2, os._exit, (0,)).start()"
    await repl.execute(code)
    session = repl._kernel.session
    assert session is not None
    # Wait for the kernel to finish exiting (polling: there is no exit event to wait on).
    with anyio.fail_after(10):
        while await session.is_alive():  # noqa: ASYNC110
            await anyio.sleep(0.05)
    after = await repl.execute("'kept' in globals()")
    assert after["return_value"] == "False"
    assert "exited between executions" in after["notice"]


@pytest.mark.parametrize(
    "call", ["exit()", "quit()", "sys.exit()", "sys.exit(0)", "raise SystemExit"]
)
async def test_exit_stops_the_cell_and_keeps_the_kernel(repl: PyRepl, call: str) -> None:
    code = f"import sys\nkept = 'yes'\nprint('before')\n{call}\nprint('after')"
    result = await repl.execute(code)
    assert result["success"] is True, result
    assert result["error"] is None
    assert result["stdout"] == "before\n"
    assert result["stderr"] == ""  # no "To exit: use 'exit', 'quit', or Ctrl-D." hint
    assert "kernel keeps running" in result["notice"]
    # Neither the next execution nor the one after it finds a dead kernel.
    for _ in range(2):
        await anyio.sleep(0.3)
        after = await repl.execute("kept")
        assert after["return_value"] == "'yes'", after
        assert after["notice"] is None


async def test_bare_exit_line_keeps_the_kernel(repl: PyRepl) -> None:
    await repl.reset()  # the namespace IPython rebuilds must hold the guarded exit too
    await repl.execute("kept = 'yes'")
    result = await repl.execute("exit")  # IPython calls it: a one-line cell is autocalled
    assert result["success"] is True
    assert "kernel keeps running" in result["notice"]
    for _ in range(2):
        await anyio.sleep(0.3)
        after = await repl.execute("kept")
        assert after["return_value"] == "'yes'", after


@pytest.mark.parametrize("call", ["exit(3)", "quit(3)", "sys.exit(3)"])
async def test_exit_with_a_failure_code_fails_the_cell(repl: PyRepl, call: str) -> None:
    result = await repl.execute(f"import sys\nkept = 'yes'\n{call}\nprint('after')")
    assert result["success"] is False
    assert result["error"].startswith("SystemExit: 3")
    assert result["stdout"] == ""
    assert "kernel keeps running" in result["notice"]
    await anyio.sleep(0.3)
    assert (await repl.execute("kept"))["return_value"] == "'yes'"


async def test_exit_request_that_gets_through_restarts_with_a_notice(repl: PyRepl) -> None:
    # Bypass the kernel-side exit() guard: IPython's own ask_exit stops the kernel.
    code = "kept = 1\nip = get_ipython()\nip.keepkernel_on_exit = False\ntype(ip).ask_exit(ip)"
    result = await repl.execute(code)
    assert result["success"] is True
    assert "next execution starts in a fresh kernel" in result["notice"]
    notices = []
    for _ in range(2):
        await anyio.sleep(0.3)
        after = await repl.execute("'kept' in globals()")
        assert after["success"], after
        assert after["return_value"] == "False"
        notices.append(after["notice"])
    # Like every replaced kernel, the next result says so, once.
    assert "exited because the code asked it to" in notices[0]
    assert notices[1] is None


async def test_repeated_deaths_raise_instead_of_looping(tmp_path: Path) -> None:
    async with PyRepl(tmp_path, max_kernel_deaths=2, log_dir=tmp_path / "logs") as repl:
        for _ in range(2):
            result = await repl.execute("import os\nos._exit(1)")
            assert result["error_details"]["error_type"] == "KernelDiedError"
        with pytest.raises(KernelError, match="died 2 times"):
            await repl.execute("1")
        await repl.restart()
        assert (await repl.execute("1 + 1"))["return_value"] == "2"


async def test_abort_interrupts_the_running_cell(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    abort = AbortSignal()
    execute = next(t for t in repl.toolset if t.name == "execute_code")

    async def abort_soon() -> None:
        await anyio.sleep(0.3)
        abort.abort("user pressed stop")

    async with anyio.create_task_group() as tg:
        tg.start_soon(abort_soon)
        result = await execute(code="import time\ntime.sleep(30)", abort_signal=abort)
    assert result["success"] is False
    assert result["error_details"]["error_type"] == "AbortedError"
    assert "user pressed stop" in result["error"]
    assert (await repl.execute("kept"))["return_value"] == "'yes'"


async def test_already_aborted_signal_does_not_run_the_code(repl: PyRepl) -> None:
    abort = AbortSignal()
    abort.abort("stopped early")
    result = await repl.execute("ran = True", abort_signal=abort)
    assert result["success"] is False
    assert "aborted (stopped early) before it started" in result["error"]
    assert (await repl.execute("'ran' in globals()"))["return_value"] == "False"


async def test_cancelled_caller_interrupts_the_kernel(repl: PyRepl) -> None:
    await repl.execute("kept = 'yes'")
    with anyio.move_on_after(0.3):
        await repl.execute("import time\ntime.sleep(30)")
    # The kernel was interrupted, not left busy: the next cell runs at once with state intact.
    after = await repl.execute("kept")
    assert after["return_value"] == "'yes'"


async def test_memory_limit(tmp_path: Path) -> None:
    async with PyRepl(tmp_path, memory_limit_mb=2048, log_dir=tmp_path / "logs") as repl:
        result = await repl.execute("block = bytearray(4 * 1024**3)")
        assert result["error_details"]["error_type"] == "MemoryError"
        assert (await repl.execute("1 + 1"))["return_value"] == "2"


async def test_cpu_time_limit_kills_a_runaway_kernel(tmp_path: Path) -> None:
    async with PyRepl(
        tmp_path, cpu_time_limit_s=1, execution_timeout_seconds=30, log_dir=tmp_path / "logs"
    ) as repl:
        result = await repl.execute("while True:\n    pass")
        assert result["error_details"]["error_type"] == "KernelDiedError"
        assert "SIGXCPU" in result["error"]


async def test_start_failure_is_a_kernel_error(tmp_path: Path) -> None:
    """A working directory removed after construction is named as such at start (it read like
    a missing interpreter); a missing one is refused at construction."""
    with pytest.raises(ArgumentValueError, match="working_directory"):
        PyRepl(tmp_path / "missing", log_dir=tmp_path / "logs")
    (tmp_path / "missing").mkdir()
    repl = PyRepl(tmp_path / "missing", log_dir=tmp_path / "logs")
    (tmp_path / "missing").rmdir()
    with pytest.raises(KernelError, match=r"working directory .*missing' does not exist"):
        await repl.execute("1")
    await repl.close()
