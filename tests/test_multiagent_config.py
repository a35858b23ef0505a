"""Multi-agent config files: ``kind: group`` with ``agents:``, a react agent with ``handoffs:``,
run in process (``run_config``) and with ``simplellmfunc run --trace`` against the mock server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from acceptance_support import clean_env, cli, write
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.runtime import load_agent_config, run_config
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec


@pytest.fixture
async def server() -> AsyncIterator[MockLLMServer]:
    async with MockLLMServer(default=Reply.text("fine")) as mock:
        yield mock


@pytest.fixture
def env(server: MockLLMServer) -> dict[str, str]:
    return clean_env({"OPENAI_API_KEY": "sk-test-123456789", "OPENAI_BASE_URL": server.url})


def team_files(folder: Path) -> tuple[Path, Path]:
    """A group of two members and a desk agent that hands off to the second member."""
    (folder / "members").mkdir()
    write(folder / "members" / "writer.yml", "model: openai:mock-model\nsystem: You write.\n")
    write(folder / "members" / "critic.yml", "model: openai:mock-model\nsystem: You criticise.\n")
    group = write(
        folder / "group.yml",
        "kind: group\nmodel: openai:mock-model\n"
        "agents: [members/writer.yml, members/critic.yml]\n"
        "group: {max_rounds: 3, stop_keywords: [APPROVED]}\n",
    )
    desk = write(
        folder / "desk.yml",
        "model: openai:mock-model\nsystem: You route.\nhandoffs: [members/critic.yml]\n",
    )
    return group, desk


def by_system_prompt(request: RecordedRequest) -> Reply:
    system = request.json["messages"][0]["content"]
    if system == "You route.":
        return Reply.tool_calls(ToolCallSpec("transfer_to_critic", {"reason": "review"}))
    if system == "You criticise.":
        return Reply.text("APPROVED, nice.")
    return Reply.text("A draft.")


async def test_group_and_handoff_configs_run(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    group, desk = team_files(tmp_path)
    server.default = by_system_prompt
    result = await run_config(group, "a slogan", environ=env)
    assert result.result == "APPROVED, nice."
    speakers = [m.get("name") for m in result.history]
    assert speakers == [None, "writer", "critic"]
    assert [r.agent for r in result.trace if r.kind == "end"] == ["writer", "critic"]
    result = await run_config(desk, "review this", environ=env)
    assert result.result == "APPROVED, nice."
    assert [r.agent for r in result.trace if r.kind == "end"] == ["desk", "critic"]
    assert result.history[0] == {"role": "system", "content": "You criticise."}


async def test_cli_run_traces_which_agent_did_what(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    _group, desk = team_files(tmp_path)
    server.default = by_system_prompt
    done = await cli("run", desk, "review this", "--trace", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert "APPROVED, nice." in done.stdout
    assert "desk: tool  transfer_to_critic" in done.stderr
    assert "critic: end   answer" in done.stderr


def test_bad_team_configs_are_reported(tmp_path: Path) -> None:
    one = write(tmp_path / "one.yml", "kind: group\nmodel: openai:m\nagents: [a.yml]\n")
    with pytest.raises(ConfigError, match="two or more config files"):
        load_agent_config(one)
    stray = write(tmp_path / "stray.yml", "model: openai:m\nagents: [a.yml, b.yml]\n")
    with pytest.raises(ConfigError, match="only a group agent"):
        load_agent_config(stray)
    chain = write(tmp_path / "c.yml", "kind: chain\nmodel: openai:m\nchain: [x]\nhandoffs: [a]\n")
    with pytest.raises(ConfigError, match="cannot hand off"):
        load_agent_config(chain)
    group, _ = team_files(tmp_path)
    config = load_agent_config(group)
    assert config.agents == [
        str(tmp_path / "members" / "writer.yml"),
        str(tmp_path / "members" / "critic.yml"),
    ]
