"""PyRepl lifecycle: nothing survives close, cancellation or interpreter exit; the kernel pool."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest

from process_support import host_process
from simplellmfunc.builtin import KernelPool, PyRepl
from simplellmfunc.builtin.pyrepl._reaper import live_count

SPAWN_CHILD = "import subprocess\nchild = subprocess.Popen(['sleep', '60'])\nchild.pid"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"orphan processes: {left}"
    assert live_count() == 0


@pytest.fixture
def temp_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private temp root, so that other test runs on the machine cannot disturb the counts.

    It is short: pytest's own temp paths (longer still under xdist) can exceed the 107 bytes a
    Unix socket path may hold, and the kernel would then move its sockets to ``/tmp``.
    """
    root = Path(tempfile.mkdtemp(prefix="slf-t-", dir="/tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def private_dirs(root: Path) -> list[str]:
    return sorted(os.listdir(root))


async def grandchild(repl: PyRepl) -> psutil.Process:
    result = await repl.execute(SPAWN_CHILD)
    return host_process(int(result["return_value"]))


async def test_close_kills_kernel_and_its_children_and_removes_files(
    tmp_path: Path, temp_root: Path
) -> None:
    repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
    try:
        await repl.start()
        child = await grandchild(repl)
        assert [d[:11] for d in private_dirs(temp_root)] == ["slf-kernel-"]
    finally:
        await repl.close()
    await repl.close()  # idempotent
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    assert private_dirs(temp_root) == []


DETACHED = {
    "new session": (
        "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True).pid"
    ),
    "new session, empty environment": (
        "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True, env={}).pid"
    ),
    "daemon (double fork)": (
        "import subprocess\n"
        "shell = subprocess.run(\n"
        "    ['sh', '-c', 'sleep 60 >/dev/null 2>&1 & echo $!'],\n"
        "    start_new_session=True, capture_output=True, text=True)\n"
        "int(shell.stdout)"
    ),
}


async def gone(process: psutil.Process, seconds: float = 5.0) -> bool:
    """Whether ``process`` ended (a zombie waiting for its new parent counts as ended)."""
    with anyio.move_on_after(seconds):
        while True:
            try:
                if process.status() == psutil.STATUS_ZOMBIE:
                    return True
            except psutil.NoSuchProcess:
                return True
            await anyio.sleep(0.05)
    return False


@pytest.mark.parametrize("code", list(DETACHED.values()), ids=list(DETACHED))
async def test_close_kills_processes_the_kernel_detached(
    tmp_path: Path, temp_root: Path, code: str
) -> None:
    async with await anyio.open_process(["sleep", "60"]) as bystander:  # the host's own
        repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
        try:
            result = await repl.execute(code)
            detached = host_process(int(result["return_value"]))
            assert detached.is_running()
        finally:
            await repl.close()
            try:
                assert await gone(detached)
                assert bystander.returncode is None  # close() spared it
            finally:
                bystander.kill()
                await bystander.wait()
    assert private_dirs(temp_root) == []


@pytest.mark.parametrize("how", ["restart", "death", "timeout"])
async def test_replacing_the_kernel_kills_what_it_detached(tmp_path: Path, how: str) -> None:
    async with PyRepl(
        tmp_path, execution_timeout_seconds=1, interrupt_grace_seconds=1, log_dir=tmp_path / "logs"
    ) as repl:
        result = await repl.execute(DETACHED["new session"])
        detached = host_process(int(result["return_value"]))
        if how == "restart":
            await repl.restart()
        elif how == "death":
            await repl.execute("import os\nos._exit(1)")
        else:
            ignores = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
            await repl.execute(ignores + "time.sleep(60)")
        assert await gone(detached)
        assert (await repl.execute("1"))["return_value"] == "1"


async def test_cancelled_task_still_cleans_up(tmp_path: Path, temp_root: Path) -> None:
    repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
    await repl.start()  # so that the cancellation below lands in the cell, however slow the box
    with anyio.move_on_after(0.5):
        async with repl:
            await repl.execute("import time\ntime.sleep(60)")
    assert not repl.is_running
    assert private_dirs(temp_root) == []


async def test_cancelled_during_start_leaves_nothing(tmp_path: Path, temp_root: Path) -> None:
    repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
    with anyio.move_on_after(0.2):
        await repl.start()
    await repl.close()
    assert private_dirs(temp_root) == []


def test_interpreter_exit_reaps_kernels(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import anyio, os, sys
        from simplellmfunc.builtin import PyRepl
        sys.path.insert(0, os.environ["TESTS"])
        from process_support import host_process

        async def main():
            repl = PyRepl(log_dir=os.environ["LOGS"])  # never closed on purpose
            result = await repl.execute(
                "import os, subprocess\\n"
                "child = subprocess.Popen(['sleep', '60'])\\n"
                "(os.getpid(), child.pid)"
            )
            # The pids the kernel sees are its namespace's: name the host's processes.
            inner = eval(result["return_value"])
            print([host_process(pid).pid for pid in inner], flush=True)

        anyio.run(main)
        """
    )
    env = {**os.environ, "LOGS": str(tmp_path / "logs"), "TESTS": str(Path(__file__).parent)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    kernel_pid, child_pid = eval(done.stdout.strip())  # a list of two ints
    for pid in (kernel_pid, child_pid):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_pool_gives_ready_kernels_configured_per_instance(
    tmp_path: Path, temp_root: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # A sandboxed kernel sees only the workspace it started with: the pool's is `work`.
    async with KernelPool(size=1, working_directory=work) as pool:
        await pool.wait_ready()
        assert pool.idle == 1
        repl = PyRepl(work, pool=pool, env={"POOL_VAR": "set"}, log_dir=tmp_path / "logs")
        other = PyRepl(work, pool=pool, log_dir=tmp_path / "logs")
        try:
            await repl.start()
            result = await repl.execute("import os\n(os.getcwd(), os.environ['POOL_VAR'])")
            assert ast.literal_eval(result["return_value"]) == (str(work), "set")
            result = await other.execute("'POOL_VAR' in __import__('os').environ")
            assert result["return_value"] == "False"
        finally:
            await other.close()
            await repl.close()
        await pool.wait_ready()
        assert len(private_dirs(temp_root)) == 1  # the refilled idle kernel
    assert private_dirs(temp_root) == []


async def test_pool_must_be_open(tmp_path: Path) -> None:
    from simplellmfunc.exceptions import KernelError

    repl = PyRepl(tmp_path, pool=KernelPool(size=1), log_dir=tmp_path / "logs")
    with pytest.raises(KernelError, match="pool is not open"):
        await repl.start()
    await repl.close()
