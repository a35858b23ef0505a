"""ShellTool and CLIAgentTool: quoting, process-group kills on timeout and abort, output caps,
errors the model sees, and a real agent run calling a shell tool."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acceptance_support import alive, eventually, read_pid
from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc.exceptions import ToolExecutionError, UserError
from simplellmfunc.runtime import CLIAgentTool, ShellTool, run_command
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.tools import ArgumentsError

GUARD = 20  # seconds: a deadlock guard, never an assertion on speed


async def wait_for_pid(path: Path) -> int:
    assert await eventually(lambda: read_pid(path) is not None, GUARD)
    pid = read_pid(path)
    assert pid is not None
    return pid


async def wait_dead(pid: int) -> bool:
    return await eventually(lambda: not alive(pid), GUARD)


async def test_an_argument_is_one_quoted_word(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    nasty = (
        f'it\'s "quoted"; touch {marker} $(touch {marker}) `touch {marker}` | cat '
        f"&& touch {marker}\nsecond line * ${{HOME}}"
    )
    tool = ShellTool("echo_arg", "printf '%s|' {}")
    assert tool.parameters["required"] == ["input"]
    assert await tool(input=nasty) == nasty + "|"
    assert not marker.exists()


async def test_named_parameters_and_other_braces() -> None:
    tool = ShellTool(
        "pair",
        "printf '%s+%s ' {a} {b}; echo '{not_a_param}' | awk '{print $1}'",
        parameters=["a", "b"],
    )
    assert set(tool.parameters["properties"]) == {"a", "b"}
    assert tool.command_line({"a": "x y", "b": 3}) == (
        "printf '%s+%s ' 'x y' 3; echo '{not_a_param}' | awk '{print $1}'"
    )
    assert (await tool(a="x y", b=True)).strip() == "x y+true {not_a_param}"


async def test_no_placeholder_means_no_parameters() -> None:
    tool = ShellTool("home", "echo ${HOME:+set}")
    assert tool.parameters["properties"] == {}
    assert (await tool()).strip() == "set"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [({}, "input: missing"), ({"input": "a", "x": 1}, "x: unknown"), ({"input": [1]}, "string")],
)
async def test_bad_arguments_are_refused(arguments: dict[str, Any], problem: str) -> None:
    tool = ShellTool("t", "echo {}")
    with pytest.raises(ArgumentsError, match=problem):
        await tool.invoke(arguments)


def test_bad_definitions_are_user_errors() -> None:
    with pytest.raises(UserError):
        ShellTool("t", "  ")
    with pytest.raises(UserError):
        ShellTool("t", "echo {}", timeout=0)
    with pytest.raises(UserError):
        ShellTool("t", "echo {1a}", parameters=["1a"])
    with pytest.raises(UserError):
        CLIAgentTool("cat", output="xml")  # type: ignore[arg-type]


async def test_failure_shows_status_and_stderr() -> None:
    tool = ShellTool("fail", "echo partial; echo 'went wrong' >&2; exit 3")
    with pytest.raises(ToolExecutionError, match=r"status 3: went wrong"):
        await tool()


async def test_stderr_of_a_success_is_shown_after_stdout() -> None:
    tool = ShellTool("warn", "echo result; echo warning >&2")
    assert await tool() == "result\n\n[stderr]\nwarning\n"


async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    tool = ShellTool("slow", f"sleep 60 & echo $! > {pid_file}; echo started; wait", timeout=0.5)
    with anyio.fail_after(GUARD), pytest.raises(ToolExecutionError, match=r"timed out after 0\.5"):
        await tool()
    child = int(pid_file.read_text())
    assert await wait_dead(child), "the background child survived the timeout"


async def test_output_so_far_comes_with_a_timeout() -> None:
    tool = ShellTool("slow", "echo first-part; sleep 60", timeout=0.5)
    with anyio.fail_after(GUARD), pytest.raises(ToolExecutionError, match="first-part"):
        await tool()


async def test_cancellation_kills_the_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    tool = ShellTool("slow", f"sleep 60 & echo $! > {pid_file}; wait", timeout=None)
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(tool.invoke, {})
            child = await wait_for_pid(pid_file)
            group.cancel_scope.cancel()
    assert await wait_dead(child), "the background child survived the cancellation"


async def test_cancellation_while_starting_leaves_nothing(tmp_path: Path) -> None:
    pid_file = tmp_path / "shell.pid"
    tool = ShellTool("slow", f"echo $$ > {pid_file}; sleep 60", timeout=None)
    with anyio.move_on_after(0):  # cancelled at the first checkpoint: while starting
        await tool.invoke({})
    # A shell that did start gets a second to write its pid; then it must die.
    if await eventually(lambda: read_pid(pid_file) is not None, 1):
        assert await wait_dead(await wait_for_pid(pid_file))


async def test_leftovers_of_a_finished_command_are_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    tool = ShellTool("bg", f"sleep 60 > /dev/null 2>&1 & echo $! > {pid_file}; echo done")
    with anyio.fail_after(GUARD):
        assert (await tool()).strip() == "done"
    assert await wait_dead(int(pid_file.read_text()))


async def test_output_is_capped_without_blocking_the_command() -> None:
    tool = ShellTool(
        "big", "head -c 5000000 /dev/zero | tr '\\0' y; echo; echo tail", max_output_chars=100
    )
    with anyio.fail_after(GUARD):
        text = await tool()
    assert text.startswith("y" * 100)
    assert "more bytes of output cut" in text
    assert "tail" not in text


async def test_run_command_reports_everything() -> None:
    output = await run_command("cat; echo err >&2; exit 5", stdin="in", max_output_chars=2)
    assert (output.returncode, output.stdout, output.stderr) == (5, "in", "er")
    assert (output.stdout_dropped, output.stderr_dropped, output.timed_out) == (0, 2, False)


async def test_a_missing_working_directory_is_a_tool_error(tmp_path: Path) -> None:
    tool = ShellTool("t", "true", cwd=tmp_path / "missing")
    with pytest.raises(ToolExecutionError, match="cannot start"):
        await tool()


async def test_cli_agent_reads_stdin_and_answers_on_stdout() -> None:
    agent = CLIAgentTool("tr a-z A-Z", name="upper")
    assert agent.parameters["required"] == ["input"]
    assert await agent(input="hello agent\n") == "HELLO AGENT"


async def test_cli_agent_json_output(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, sys\n"
        "task = sys.stdin.read()\n"
        "print(json.dumps({'result': 'did ' + task, 'stats': {}}))\n"
    )
    agent = CLIAgentTool(f"{sys.executable} {script}", output="json")
    assert await agent(input="the task") == "did the task"
    raw = CLIAgentTool("echo '[1, 2]'", output="json")
    assert json.loads(await raw(input="x")) == [1, 2]
    broken = CLIAgentTool("echo not-json", output="json")
    with pytest.raises(ToolExecutionError, match="invalid JSON"):
        await broken(input="x")


async def test_cli_agent_failure_is_a_tool_error() -> None:
    agent = CLIAgentTool("cat > /dev/null; echo 'no model configured' >&2; exit 2")
    with pytest.raises(ToolExecutionError, match="status 2: no model configured"):
        await agent(input="x")


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


async def test_an_agent_calls_a_shell_tool(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    calc = ShellTool("calc", "expr {a} {op} {b}", parameters=["a", "op", "b"], timeout=5)
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("calc", {"a": 6, "op": "*", "b": 7}, id="c1")),
        Reply.text("6 * 7 = 42"),
    )

    @llm_chat(llm, toolkit=[calc])
    async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """Use calc for arithmetic."""

    with anyio.fail_after(GUARD):
        replies = [item async for item in agent("6*7?")]
    history = replies[-1][1]
    tool_message = next(m for m in history if m["role"] == "tool")
    assert tool_message["content"].strip() == "42"
    sent = mock_server.requests[0].json["tools"][0]["function"]
    assert sent["name"] == "calc"
    assert sent["parameters"]["required"] == ["a", "op", "b"]
