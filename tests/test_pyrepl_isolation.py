"""PyRepl isolation: separate namespaces, parallel instances, queued executions, environment."""

from __future__ import annotations

import ast
import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from simplellmfunc.builtin import PyRepl

INTERVAL = "import time\n_t0 = time.time()\ntime.sleep({})\n(_t0, time.time())"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    left = {p.pid for p in psutil.Process().children(recursive=True)} - before
    assert not left, f"orphan processes: {left}"


def interval(result: dict[str, Any]) -> tuple[float, float]:
    start, end = ast.literal_eval(result["return_value"])
    return float(start), float(end)


async def test_instances_do_not_share_state_and_run_in_parallel(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    async with PyRepl(tmp_path, log_dir=logs) as one, PyRepl(tmp_path, log_dir=logs) as two:
        await one.execute("secret = 'one'")
        result = await two.execute("secret")
        assert result["error_details"]["error_type"] == "NameError"
        assert one.instance_id != two.instance_id
        assert one.audit_log_dir != two.audit_log_dir
        results: dict[str, dict[str, Any]] = {}

        async def run(name: str, repl: PyRepl) -> None:
            results[name] = await repl.execute(INTERVAL.format(1.0))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "one", one)
            tg.start_soon(run, "two", two)
        (a0, a1), (b0, b1) = interval(results["one"]), interval(results["two"])
        # The two kernels ran at the same time: each started before the other ended.
        assert a0 < b1
        assert b0 < a1


async def test_one_instance_queues_its_executions(tmp_path: Path) -> None:
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        results: list[dict[str, Any]] = []

        async def run() -> None:
            results.append(await repl.execute(INTERVAL.format(0.3)))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(run)
        spans = sorted(interval(r) for r in results)
        assert all(prev[1] <= nxt[0] for prev, nxt in itertools.pairwise(spans))
        counts = sorted(r["execution_count"] for r in results)
        assert counts == [1, 2, 3]


async def test_host_secrets_stay_out_of_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-host-secret")
    env = {"PROJECT_TOKEN": "given-on-purpose"}
    async with PyRepl(tmp_path, env=env, log_dir=tmp_path / "logs") as repl:
        code = (
            "import os, subprocess\n"
            "leaks = [k for k in os.environ if 'SECRET' in k or 'API_KEY' in k]\n"
            "child = subprocess.run(['env'], capture_output=True, text=True).stdout\n"
            "(leaks, 'sk-host' in child, os.environ['PROJECT_TOKEN'], 'PATH' in os.environ)"
        )
        result = await repl.execute(code)
    assert result["return_value"] == "([], False, 'given-on-purpose', True)"


async def test_working_directory_is_the_kernel_cwd(tmp_path: Path) -> None:
    workdir = tmp_path / "project"
    workdir.mkdir()
    (workdir / "data.txt").write_text("hello from disk")
    async with PyRepl(workdir, log_dir=tmp_path / "logs") as repl:
        result = await repl.execute("import os\n(os.getcwd(), open('data.txt').read())")
    assert ast.literal_eval(result["return_value"]) == (str(workdir), "hello from disk")


async def test_reset_and_list_variables(tmp_path: Path) -> None:
    async with PyRepl(tmp_path, log_dir=tmp_path / "logs") as repl:
        list_tool = next(t for t in repl.toolset if t.name == "list_variables")
        reset_tool = next(t for t in repl.toolset if t.name == "reset_repl")
        assert await repl.list_variables() == []
        await repl.execute("x = 1\ndata = [1, 2]\n_private = 3\nimport math\ndef f(): pass")
        variables = await list_tool()
        assert variables == [
            {"name": "x", "type": "int"},
            {"name": "data", "type": "list"},
            {"name": "math", "type": "module"},
            {"name": "f", "type": "function"},
        ]
        assert list_tool.render(variables).startswith('[{"name": "x"')
        message = await reset_tool()
        assert "cleared" in message
        assert await repl.list_variables() == []
        assert list_tool.render([]) == "No variables are defined."
        assert (await repl.execute("x"))["error_details"]["error_type"] == "NameError"


async def test_lazy_start_and_no_files_before_use(tmp_path: Path) -> None:
    repl = PyRepl(tmp_path, log_dir=tmp_path / "logs")
    assert not repl.is_running
    assert not repl.audit_log_dir.exists()
    assert await repl.reset()
    assert await repl.list_variables() == []
    assert not repl.is_running
    assert (await repl.execute("2 + 2"))["return_value"] == "4"
    assert repl.is_running
    assert repl.audit_log_file.exists()
    await repl.close()
    assert not repl.is_running
    assert os.listdir(tmp_path) == ["logs"]
