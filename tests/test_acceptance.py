"""Seed 001 §15.3, automated: the six acceptance commands run as subprocesses of the real
command line, against the mock LLM server (scripted by rules, below) and the demo MCP server.

The shipped ``examples/agents/*.yml`` run unchanged; the environment points their
``deepseek:`` preset at the mock server (``DEEPSEEK_BASE_URL``), the MCP server at this
interpreter and the files into a temporary directory (``SIMPLELLMFUNC_*`` settings).
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acceptance_support import CLI_LINE, agent_file, clean_env, cli, eventually, finish, start_cli
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

WORKER_BRIEF = "WORKER-BRIEF: qubits use superposition and entanglement."
LONG_TEXT = " ".join(
    f"Sentence {i} of a long text about the history of computing." for i in range(60)
)


def text_of(content: Any) -> str:
    """The text of a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def turn_of(request: RecordedRequest) -> tuple[str, str, list[str], list[str]]:
    """(system prompt, last user text, tool results after it, tool names offered)."""
    messages = request.json["messages"]
    system = text_of(messages[0]["content"]) if messages[0]["role"] == "system" else ""
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    results = [text_of(m["content"]) for m in messages[last + 1 :] if m["role"] == "tool"]
    tools = [t["function"]["name"] for t in request.json.get("tools") or []]
    return system, text_of(messages[last]["content"]), results, tools


def brain(request: RecordedRequest) -> Reply:
    """What the mock model answers, by the agent and the turn it sees."""
    system, user, results, tools = turn_of(request)
    if "SLOW" in system:
        return Reply.text("thinking", drip=0.05)
    if "CUT" in system:  # every answer cut off by max_tokens
        return Reply.text("The answer is", finish_reason="length")
    if system.startswith("You are a research assistant"):
        return Reply.text(WORKER_BRIEF)
    if "sub" in tools:
        if not results:
            return Reply.tool_calls(ToolCallSpec("sub", {"input": user}), text="Delegating.")
        return Reply.text(f"Report based on the research assistant: {results[-1]}")
    if "calc" in tools:
        if not results:
            return Reply.tool_calls(ToolCallSpec("calc", {"a": "1", "op": "+", "b": "1"}))
        return Reply.text(f"Final answer: 1+1 = {results[-1].strip()}")
    if "demo_get_sum" in tools and "1+2+" in user:
        if not results:
            return Reply.tool_calls(ToolCallSpec("demo_get_sum", {"n": 100}))
        return Reply.text(f"The sum of 1..100 is {results[-1].strip()}.")
    if "what is my name" in user.lower():
        earlier = system + json.dumps(request.json["messages"][1:-1])
        return Reply.text(
            "Your name is Alice." if "Alice" in earlier else "I don't know your name."
        )
    if user.lower().startswith("remember"):
        return Reply.text("Got it, I will remember that.")
    if "editor" in system:
        return Reply.text(f"stage output {len(request.json['messages'])}: {user[-40:]}")
    return Reply.text("Hello! How can I help you today?", chunks=4)


@pytest.fixture
async def server() -> AsyncIterator[MockLLMServer]:
    async with MockLLMServer(default=brain) as mock:
        yield mock


@pytest.fixture
def env(server: MockLLMServer, tmp_path: Path) -> dict[str, str]:
    return clean_env(
        {
            "DEEPSEEK_API_KEY": "sk-test-123456789",
            "DEEPSEEK_BASE_URL": server.url,
            "SIMPLELLMFUNC_MEMORY__PATH": str(tmp_path / "memory.db"),
            "SIMPLELLMFUNC_CHECKPOINTS__DIR": str(tmp_path / "checkpoints"),
        }
    )


@pytest.fixture
def mcp_env(env: dict[str, str]) -> dict[str, str]:
    """``env``, with the demo MCP server of agent-config.yml started by this interpreter."""
    return {**env, "SIMPLELLMFUNC_TOOLKIT__MCPSERVERS__DEMO__COMMAND": sys.executable}


def systems(server: MockLLMServer) -> list[str]:
    return [turn_of(r)[0] for r in server.requests]


async def test_1_simple_agent_is_one_llm_step(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli("run", agent_file("simple.yml"), "Hello", "--trace", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout == "Hello! How can I help you today?\n"
    assert "[0] llm   deepseek-chat" in done.stderr
    assert "[1] end   answer" in done.stderr
    assert "(2 steps" in done.stderr
    assert "1 LLM call," in done.stderr
    assert len(server.requests) == 1
    assert "tools" not in server.requests[0].json


async def test_2_react_agent_ends_with_a_final_answer(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli(
        "run",
        agent_file("react.yml"),
        "1+1=?",
        "--trace",
        "--format",
        "json",
        env=env,
        cwd=tmp_path,
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["result"] == "Final answer: 1+1 = 2"
    assert result["terminated_by"] == "answer"
    assert 2 <= result["stats"]["llm_calls"] <= 5
    kinds = [r["kind"] for r in result["trace"]]
    assert kinds == ["llm", "tool", "llm", "end"]
    assert "→ calc(" in done.stderr  # progress on stderr
    assert "[1] tool  calc" in done.stderr  # the timeline


async def test_3_mcp_tool_answers_5050(
    server: MockLLMServer, mcp_env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli(
        "run",
        agent_file("agent-config.yml"),
        "compute 1+2+...+100",
        "--trace",
        "--format",
        "json",
        env=mcp_env,
        cwd=tmp_path,
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert "5050" in result["result"]
    tool = next(r for r in result["trace"] if r["kind"] == "tool")
    assert (tool["name"], tool["success"]) == ("demo_get_sum", True)
    assert "5050" in tool["output"]
    assert "demo_get_sum" in done.stderr


async def test_4_chain_is_one_step_per_stage(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    done = await cli(
        "run",
        agent_file("chain.yml"),
        "-",
        "--trace",
        "--format",
        "json",
        stdin=LONG_TEXT,
        env=env,
        cwd=tmp_path,
    )
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stats"]["llm_calls"] == 3 == len(server.requests)
    users = [turn_of(r)[1] for r in server.requests]
    assert LONG_TEXT in users[0]
    assert users[0].startswith("Summarize")
    assert users[1].startswith("List the five")
    assert "stage output" in users[1]
    assert users[2].startswith("Write a title")
    assert "stage output" in users[2]
    assert done.stderr.count("== stage") == 3


async def test_5_repl_remembers_across_turns_and_restarts(
    server: MockLLMServer, mcp_env: dict[str, str], tmp_path: Path
) -> None:
    config = agent_file("agent-config.yml")
    first = await cli(
        "repl",
        config,
        stdin="remember: my name is Alice\nwhat is my name?\n:memory\n:stats\n:tools\n:quit\n",
        env=mcp_env,
        cwd=tmp_path,
    )
    assert first.code == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[:2] == ["Got it, I will remember that.", "Your name is Alice."]
    assert any("remember: my name is Alice" in line for line in lines)  # :memory
    assert "llm_calls: 2" in lines  # :stats
    assert "demo_get_sum" in lines  # :tools
    # A new process: the conversation is gone, the SQLite memory is not.
    second = await cli("repl", config, stdin="what is my name?\n", env=mcp_env, cwd=tmp_path)
    assert second.code == 0, second.stderr
    assert second.stdout.splitlines()[0] == "Your name is Alice."
    assert "Alice" in systems(server)[-1]  # it came from memory, in the system prompt


async def test_5b_without_a_persistent_store_a_restart_forgets(
    server: MockLLMServer, mcp_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**mcp_env, "SIMPLELLMFUNC_MEMORY__STORE": "memory"}
    config = agent_file("agent-config.yml")
    first = await cli("repl", config, stdin="remember: my name is Alice\n", env=env, cwd=tmp_path)
    assert first.code == 0, first.stderr
    second = await cli("repl", config, stdin="what is my name?\n", env=env, cwd=tmp_path)
    assert second.stdout.splitlines()[0] == "I don't know your name."


async def test_5c_repl_checkpoints_save_and_load(
    server: MockLLMServer, mcp_env: dict[str, str], tmp_path: Path
) -> None:
    config = agent_file("agent-config.yml")
    script = "remember: my name is Alice\n:save after alice\n:clear\n:load\nwhat is my name?\n"
    done = await cli("repl", config, stdin=script, env=mcp_env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("saved checkpoint 1 (")
    assert lines[2] == "new conversation"
    assert lines[3] == "loaded checkpoint: after alice (3 messages)"
    assert lines[4] == "Your name is Alice."
    assert (tmp_path / "checkpoints" / "cp_001.json").is_file()


async def test_6_master_calls_the_worker_through_the_command_line(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    worker = f"{CLI_LINE} run {agent_file('worker.yml')} --quiet -"
    done = await cli(
        "run",
        agent_file("master.yml"),
        "research quantum computing",
        "--tool",
        f"sub={worker}",
        "--trace",
        env=env,
        cwd=tmp_path,
    )
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == f"Report based on the research assistant: {WORKER_BRIEF}"
    worker_turns = [
        turn_of(r)
        for r in server.requests
        if turn_of(r)[0].startswith("You are a research assistant")
    ]
    assert [t[1] for t in worker_turns] == ["research quantum computing"]
    assert "[1] tool  sub" in done.stderr


async def test_ctrl_c_aborts_cleanly_with_a_partial_trace(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    process = await start_cli(
        "run", agent_file("simple.yml"), "Hello", "--set", "system=SLOW", env=env, cwd=tmp_path
    )
    assert await eventually(lambda: bool(server.requests) or process.returncode is not None)
    await anyio.sleep(0.2)  # some of the dripping reply arrives
    process.send_signal(signal.SIGINT)
    done = await finish(process)
    assert done.code == 130, done.stderr
    assert "aborted: interrupted by SIGINT" in done.stderr
    assert "[0] llm   deepseek-chat" in done.stderr  # the partial trace
    assert "end   aborted" in done.stderr
    assert "Traceback" not in done.stderr


async def test_run_timeout_ends_a_run_that_never_finishes_with_one_line(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    """limits.run_timeout (60 s in the shipped configs): a reply that never ends (the mock
    drips forever) is aborted at the deadline; stderr says why in one line, no traceback."""
    done = await finish(
        await start_cli(
            "run",
            agent_file("simple.yml"),
            "Hello",
            "--set",
            "system=SLOW",
            "--set",
            "limits.run_timeout=1",
            env=env,
            cwd=tmp_path,
        )
    )
    assert done.code == 130, done.stderr
    assert "aborted: timed out after 1 s (limits.run_timeout)" in done.stderr
    assert "end   aborted" in done.stderr  # the partial trace
    assert "Traceback" not in done.stderr


async def test_a_run_under_run_timeout_fails_with_its_own_error(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    """The deadline's timer runs beside the run: a run that fails (an answer cut off by
    max_tokens, as SmolLM2's often is) still ends with its one-line error, not an exception
    group's traceback."""
    done = await cli(
        "run", agent_file("simple.yml"), "Hello", "--set", "system=CUT", env=env, cwd=tmp_path
    )
    assert done.code == 1, done.stderr
    assert "error: run failed: the final answer was cut off" in done.stderr
    assert "Traceback" not in done.stderr
