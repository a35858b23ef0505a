"""A stdio MCP server that fails before the handshake: the error says how it exited and what it
wrote to stderr (the tail, bounded, without the secrets it was given), on the CLI too."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from mcp_servers.support import HERE, children, wait_gone
from simplellmfunc.exceptions import MCPError
from simplellmfunc.mcp import MCPToolset

FAILING = HERE / "failing_server.py"
BROKEN_IMPORT = HERE / "broken_import_server.py"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    before = children()
    yield
    assert not wait_gone(sorted(children() - before)), "a server process outlived its test"


async def start_failure(args: list[str], **options: object) -> MCPError:
    toolset = MCPToolset.stdio(sys.executable, args, name="bad", **options)  # type: ignore[arg-type]
    with pytest.raises(MCPError) as caught:
        await toolset.connect()
    assert not toolset.connected
    return caught.value


async def test_an_exit_code_and_the_stderr_tail_are_in_the_error() -> None:
    error = await start_failure([str(FAILING), "exit", "3"])
    assert error.exit_code == 3
    assert error.stderr_tail.splitlines() == [
        "starting the failing server",
        "fatal: cannot open the database (exit 3)",
    ]
    text = str(error)
    assert text.startswith("cannot connect to MCP server bad: the server exited with code 3")
    assert "fatal: cannot open the database (exit 3)" in text
    assert "Connection closed" not in text


async def test_a_missing_script() -> None:
    error = await start_failure(["/nonexistent/mcp_server.py"])
    assert error.exit_code == 2
    assert "can't open file" in error.stderr_tail
    assert "/nonexistent/mcp_server.py" in str(error)


async def test_an_import_error() -> None:
    error = await start_failure([str(BROKEN_IMPORT)])
    assert error.exit_code == 1
    assert error.stderr_tail.splitlines()[-1] == (
        "ModuleNotFoundError: No module named 'simplellmfunc_no_such_dependency'"
    )
    assert "Traceback (most recent call last)" in error.stderr_tail
    assert "No module named 'simplellmfunc_no_such_dependency'" in str(error)


async def test_a_server_killed_by_a_signal() -> None:
    error = await start_failure([str(FAILING), "killed"])
    assert error.exit_code == -9
    assert "the server was killed by SIGKILL" in str(error)


async def test_the_tail_is_bounded() -> None:
    error = await start_failure([str(FAILING), "noisy", "500"])
    lines = error.stderr_tail.splitlines()
    assert len(lines) <= 20
    assert len(error.stderr_tail) <= 4096
    assert lines[-1].startswith("noise line 0499 ")
    assert "noise line 0479 " not in error.stderr_tail
    assert len(str(error)) < 6000


async def test_secrets_given_to_the_server_stay_out_of_the_error() -> None:
    secret = "tok-very-secret-value-42"
    error = await start_failure(
        [str(FAILING), "secret", "SERVICE_TOKEN"], env={"SERVICE_TOKEN": secret}
    )
    assert "config: token=" in error.stderr_tail
    assert secret not in error.stderr_tail
    assert secret not in str(error)
    assert secret not in repr(error.args)


async def test_a_server_that_hangs_at_start_shows_its_stderr_with_the_timeout() -> None:
    hang = "import sys, time; print('waiting for the database', file=sys.stderr, flush=True); "
    hang += "time.sleep(60)"
    error = await start_failure(["-c", hang], connect_timeout=1.0)
    assert "no answer within 1 s" in str(error)
    assert error.exit_code is None  # it did not exit: we stopped it
    assert error.stderr_tail == "waiting for the database"
    assert "waiting for the database" in str(error)


async def test_a_server_that_exits_quietly() -> None:
    error = await start_failure(["-c", "raise SystemExit(5)"])
    assert error.exit_code == 5
    assert error.stderr_tail == ""
    assert str(error) == (
        "cannot connect to MCP server bad: the server exited with code 5 (no output on stderr)"
    )
