"""PyRepl output streams across executions: replaced ``sys.stdout``, background threads.

One kernel serves the module; the teardown checks that no child process outlives it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import psutil
import pytest
import pytest_asyncio

from simplellmfunc.builtin import PyRepl

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def children_before() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def repl(
    tmp_path_factory: pytest.TempPathFactory, children_before: set[int]
) -> AsyncIterator[PyRepl]:
    workdir = tmp_path_factory.mktemp("work")
    logs = tmp_path_factory.mktemp("logs")
    async with PyRepl(workdir, log_dir=logs) as shared:
        yield shared
    left = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    assert not left, f"orphan processes: {left}"


async def test_replaced_streams_are_restored_before_the_next_cell(repl: PyRepl) -> None:
    code = (
        "import io, sys\nsys.stdout = io.StringIO()\nsys.stderr = io.StringIO()\nprint('swallowed')"
    )
    result = await repl.execute(code)
    assert result["success"]
    assert result["stdout"] == ""
    for _ in range(2):
        after = await repl.execute("import sys\nprint('visible')\nprint('err', file=sys.stderr)")
        assert after["stdout"] == "visible\n"
        assert after["stderr"] == "err\n"


async def test_redirect_inside_one_cell_still_works(repl: PyRepl) -> None:
    code = (
        "import contextlib, io\n"
        "buffer = io.StringIO()\n"
        "with contextlib.redirect_stdout(buffer):\n"
        "    print('captured')\n"
        "print('outside', buffer.getvalue().strip())"
    )
    assert (await repl.execute(code))["stdout"] == "outside captured\n"


async def test_thread_output_in_a_later_cell_is_labelled(repl: PyRepl) -> None:
    code = (
        "import threading\n"
        "go = threading.Event()\n"
        "def worker():\n"
        "    go.wait()\n"
        "    print('from worker')\n"
        "    print('two', 'parts')\n"
        "t = threading.Thread(target=worker, name='worker')\n"
        "t.start()\n"
        "print('started')"
    )
    first = await repl.execute(code)
    assert first["stdout"] == "started\n"
    label = f"[thread 'worker' from execution [{first['execution_count']}]] "
    second = await repl.execute("go.set()\nt.join()\nprint('main')")
    assert second["stdout"] == f"{label}from worker\n{label}two parts\nmain\n"


async def test_thread_output_between_cells_comes_with_the_next_one(repl: PyRepl) -> None:
    code = (
        "import threading, time\n"
        "def late():\n"
        "    time.sleep(0.3)\n"
        "    print('late words')\n"
        "threading.Thread(target=late, name='late').start()"
    )
    first = await repl.execute(code)
    assert first["stdout"] == ""
    await anyio.sleep(1.5)
    second = await repl.execute("print('now')")
    label = f"[thread 'late' from execution [{first['execution_count']}]] "
    assert second["stdout"] == f"{label}late words\nnow\n"
    assert (await repl.execute("print('clean')"))["stdout"] == "clean\n"


async def test_thread_of_the_current_cell_is_not_labelled(repl: PyRepl) -> None:
    code = (
        "import threading\n"
        "t = threading.Thread(target=print, args=('inside',))\n"
        "t.start()\n"
        "t.join()"
    )
    assert (await repl.execute(code))["stdout"] == "inside\n"


async def test_pool_threads_belong_to_the_cell_that_submitted_the_work(repl: PyRepl) -> None:
    setup = (
        "import asyncio\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "pool = ThreadPoolExecutor(1)\n"
        "pool.submit(print, 'warm').result()\n"
        "await asyncio.to_thread(print, 'warm too')"
    )
    assert (await repl.execute(setup))["stdout"] == "warm\nwarm too\n"
    reuse = "pool.submit(print, 'work').result()\nawait asyncio.to_thread(print, 'more')"
    assert (await repl.execute(reuse))["stdout"] == "work\nmore\n"
