"""PyRepl output streams across executions: replaced ``sys.stdout``, background threads.

One kernel serves the module; the teardown checks that no child process outlives it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

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
