"""Multi-agent config files: ``kind: group`` / ``kind: parallel`` with ``agents:``, react agents
with (nested) ``handoffs:``, run in process (``run_config``, ``ConfiguredAgent``) and with
``simplellmfunc run --trace`` / ``simplellmfunc repl`` against the mock server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acceptance_support import clean_env, cli, write
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.runtime import ConfiguredAgent, load_agent_config, run_config
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
    with pytest.raises(ConfigError, match="only group and parallel agents"):
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


# -- nested handoffs, parallel, history across turns ------------------------------------------


def desk_files(folder: Path) -> Path:
    """desk -> billing -> refunds -> desk (a cycle back to the entry's own file)."""
    write(
        folder / "desk.yml",
        "model: openai:mock-model\nsystem: You route.\nhandoffs: [billing.yml]\n",
    )
    write(
        folder / "billing.yml",
        "model: openai:mock-model\nsystem: You bill.\nhandoffs: [refunds.yml]\n",
    )
    write(
        folder / "refunds.yml",
        "model: openai:mock-model\nsystem: You refund.\nhandoffs: [desk.yml]\n",
    )
    return folder / "desk.yml"


def offered(request: RecordedRequest) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools", [])]


def routed(request: RecordedRequest) -> Reply:
    """desk hands to billing, billing to refunds; refunds answers, citing what it was told."""
    system, messages = request.json["messages"][0]["content"], request.json["messages"]
    if system == "You route.":
        return Reply.tool_calls(ToolCallSpec("transfer_to_billing", {"reason": "money"}))
    if system == "You bill.":
        return Reply.tool_calls(ToolCallSpec("transfer_to_refunds", {"reason": "refund"}))
    users = [m["content"] for m in messages if m["role"] == "user"]
    return Reply.text(f"{system} turn {len([u for u in users if 'handoff' not in u])}")


async def test_nested_handoffs_route_through_the_graph(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    desk = desk_files(tmp_path)
    server.default = routed
    result = await run_config(desk, "my refund?", environ=env)
    assert result.result == "You refund. turn 1"
    assert [r.agent for r in result.trace if r.kind == "end"] == ["desk", "billing", "refunds"]
    assert result.history[0] == {"role": "system", "content": "You refund."}
    assert result.history[-1]["name"] == "refunds"
    tools = [offered(r) for r in server.requests]  # each file opened once
    assert tools == [["transfer_to_billing"], ["transfer_to_refunds"], ["transfer_to_desk"]]
    # A team member is one agent: a handing-off agent in a group is refused, by its file.
    crowd = write(
        tmp_path / "crowd.yml", "kind: group\nmodel: openai:m\nagents: [desk.yml, billing.yml]\n"
    )
    with pytest.raises(ConfigError, match=r"desk\.yml: a handing-off agent cannot be a member"):
        await run_config(crowd, "hi", environ=env)


async def test_a_handoff_cycle_is_bounded(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    desk = desk_files(tmp_path)

    def always_hand_off(request: RecordedRequest) -> Reply:
        names = offered(request)
        return Reply.tool_calls(ToolCallSpec(names[-1], {})) if names else Reply.text("Done.")

    server.default = always_hand_off
    result = await run_config(desk, "loop", environ=env)
    ends = [r.agent for r in result.trace if r.kind == "end"]
    assert len(server.requests) == 6
    assert offered(server.requests[-1]) == []
    assert ends == [
        "desk",
        "billing",
        "refunds",
        "desk",
        "billing",
        "refunds",
    ]
    assert result.result == "Done."
    # limits.max_handoffs of the entry agent sets the bound.
    server.requests.clear()
    write(
        desk,
        "model: openai:mock-model\nsystem: You route.\nhandoffs: [billing.yml]\n"
        "limits: {max_handoffs: 1}\n",
    )
    result = await run_config(desk, "loop", environ=env)
    assert [r.agent for r in result.trace if r.kind == "end"] == ["desk", "billing"]
    assert offered(server.requests[-1]) == []


def fan_out_files(folder: Path, extra: str = "") -> Path:
    write(folder / "pro.yml", "model: openai:mock-model\nsystem: You argue for.\n")
    write(folder / "con.yml", "model: openai:mock-model\nsystem: You argue against.\n")
    return write(
        folder / "panel.yml",
        f"kind: parallel\nmodel: openai:mock-model\nagents: [pro.yml, con.yml]\n{extra}",
    )


def by_side(request: RecordedRequest) -> Reply:
    system = request.json["messages"][0]["content"]
    side = "yes" if system == "You argue for." else "no"
    return Reply.text(f"{side} ({len(request.json['messages'])} messages)")


async def test_a_parallel_config_fans_out_and_gathers(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    panel = fan_out_files(tmp_path, "parallel: {limit: 1, timeout: 20}\n")
    config = load_agent_config(panel)
    assert (config.parallel.limit, config.parallel.timeout) == (1, 20)
    server.default = by_side
    done = await cli("run", panel, "tabs or spaces?", "--trace", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    assert done.stdout.strip() == "[pro] yes (2 messages)\n\n[con] no (2 messages)"
    assert "pro: end   answer" in done.stderr
    assert "con: end   answer" in done.stderr
    empty = write(tmp_path / "empty.yml", "kind: parallel\nmodel: openai:m\n")
    with pytest.raises(ConfigError, match="a parallel agent needs 'agents'"):
        load_agent_config(empty)


async def test_the_repl_carries_handoff_and_group_conversations(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    desk = desk_files(tmp_path)
    server.default = routed
    done = await cli("repl", desk, stdin="my refund?\nand now?\n", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    # The second turn goes on with the agent that answered, and its conversation.
    assert done.stdout.splitlines()[:2] == ["You refund. turn 1", "You refund. turn 2"]
    assert len(server.requests) == 4
    (tmp_path / "team").mkdir()
    group, _desk = team_files(tmp_path / "team")
    server.reset()
    server.default = by_system_prompt
    done = await cli("repl", group, stdin="a slogan\nanother\n", env=env, cwd=tmp_path)
    assert done.code == 0, done.stderr
    second_turn = server.requests[2].json["messages"]  # the writer again, after the critic
    assert [m["role"] for m in second_turn] == ["system", "user", "assistant", "user"]
    assert second_turn[-1]["content"].startswith("[critic]: APPROVED, nice.\n\n[user]: another")


async def test_a_team_agent_serves_sessions_with_their_own_histories(
    server: MockLLMServer, env: dict[str, str], tmp_path: Path
) -> None:
    """``ConfiguredAgent.chat`` (what session stores call) goes on from the history given;
    ``ConfiguredAgent.run`` (the REPL's) from the agent's own."""
    server.default = routed
    async with ConfiguredAgent(load_agent_config(desk_files(tmp_path)), environ=env) as agent:
        history: list[dict[str, Any]] = []
        for turn in (1, 2):
            items = [item async for item in agent.chat("refund?", history=history)]
            text, history = str(items[-1].response), list(items[-1].messages)
            assert text == f"You refund. turn {turn}"
        assert agent.history == []  # the agent's own conversation is untouched
    server.default = by_side
    async with ConfiguredAgent(load_agent_config(fan_out_files(tmp_path)), environ=env) as agent:
        await agent.run("one")  # what the REPL does: the agent keeps the conversation
        second = await agent.run("two")
    assert second.text == "[pro] yes (4 messages)\n\n[con] no (4 messages)"
    assert [m["role"] for m in second.history] == ["user", "assistant"] * 2
