"""Seed 001 §15.3 against a real model: the six acceptance commands of ``test_acceptance.py``,
as subprocesses of the real command line, with SmolLM2-135M behind llama.cpp (``make test-live``).

A 135M model rarely answers correctly; what must hold is a clean run through the whole stack:
exit status 0, a trace, the right number of steps where the config fixes it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acceptance_support import CLI_LINE, agent_file, clean_env, cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

LIVE_GUARD = 600  # seconds per command: a small model on a small machine is slow


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    from local_model import local_model

    async with local_model() as url:
        yield url


@pytest.fixture
def env(base_url: str, tmp_path: Path) -> dict[str, str]:
    # The examples name deepseek; the environment layer swaps in the local server, keeping
    # everything else of each file.
    return clean_env(
        {
            "SIMPLELLMFUNC_MODEL": "llamacpp:SmolLM2-135M-Instruct",
            "LLAMACPP_BASE_URL": base_url,
            "SIMPLELLMFUNC_MODEL__TIMEOUT": "300",
            "SIMPLELLMFUNC_MODEL__MAX_TOKENS": "128",
            # llama-cpp-python's server (not llama-server, which the llamacpp preset is set
            # for): native tool calls by its chatml-function-calling handler, and a JSON schema
            # only in its own json_object form (``json_schema`` is an HTTP 500 there).
            "SIMPLELLMFUNC_MODEL__CAPABILITIES": (
                '{"parallel_tool_calls": false, "native_tools": true, "json_schema": false}'
            ),
            "SIMPLELLMFUNC_MEMORY__PATH": str(tmp_path / "memory.db"),
            "SIMPLELLMFUNC_CHECKPOINTS__DIR": str(tmp_path / "checkpoints"),
        }
    )


def result_of(stdout: str) -> dict[str, object]:
    data = json.loads(stdout)
    assert isinstance(data, dict)
    return data


async def test_live_acceptance(env: dict[str, str], tmp_path: Path) -> None:
    """All six in one test: the model server starts once."""
    mcp_env = {**env, "SIMPLELLMFUNC_TOOLKIT__MCPSERVERS__DEMO__COMMAND": sys.executable}

    async def run(config: str, text: str, *options: str, environ: dict[str, str] = env) -> dict:
        done = await cli(
            "run", agent_file(config), text, "--format", "json", "--trace", *options,
            env=environ, cwd=tmp_path, guard=LIVE_GUARD,
        )  # fmt: skip
        assert done.code == 0, f"{config}: {done.stderr}"
        assert "LLM call" in done.stderr  # the timeline (its totals line)
        return result_of(done.stdout)

    # 1. simple: one LLM step.
    simple = await run("simple.yml", "Hello")
    assert simple["stats"]["llm_calls"] == 1  # type: ignore[index]
    # 2. react: at most max_steps LLM calls, ended by an answer or the step cap.
    react = await run("react.yml", "1+1=?")
    assert 1 <= react["stats"]["llm_calls"] <= 5  # type: ignore[index]
    assert react["terminated_by"] in ("answer", "implicit", "max_steps")
    # 3. MCP tools offered to a real model.
    mcp = await run("agent-config.yml", "compute 1+2+...+100", environ=mcp_env)
    assert mcp["terminated_by"] in ("answer", "implicit", "max_steps")
    # 4. chain: exactly one LLM step per stage.
    chain = await run("chain.yml", "A long text about computing. " * 20)
    assert chain["stats"]["llm_calls"] == 3  # type: ignore[index]
    # 5. repl: two turns, then a restart on the same SQLite memory.
    config = agent_file("agent-config.yml")
    for script in ("remember: my name is Alice\nwhat is my name?\n:quit\n", "what is my name?\n"):
        done = await cli(
            "repl", config, "--quiet", stdin=script, env=mcp_env, cwd=tmp_path, guard=LIVE_GUARD
        )
        assert done.code == 0, done.stderr
    # 6. master and worker, the worker run as a command.
    worker = f"{CLI_LINE} run {agent_file('worker.yml')} --quiet -"
    master = await run("master.yml", "research quantum computing", "--tool", f"sub={worker}")
    assert master["terminated_by"] in ("answer", "implicit", "max_steps")
