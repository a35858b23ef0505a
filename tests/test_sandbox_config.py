"""The ``sandbox:`` section of agent config files: loaded, checked by ``validate``, and given
to the agent's Python kernel and shell tools."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from simplellmfunc.exceptions import ConfigError
from simplellmfunc.runtime import AgentConfig, ShellTool, load_agent_config
from simplellmfunc.runtime.config import Finding, check_config
from simplellmfunc.runtime.config._build import build_toolkit
from simplellmfunc.sandbox import SandboxPolicy, isolation

SHELL = "  shell:\n    - {name: count, command: 'ls /proc'}\n"


def load(tmp_path: Path, text: str, *, pyrepl: bool = True) -> AgentConfig:
    path = tmp_path / "agent.yml"
    tools = "toolkit:\n" + ("  pyrepl: true\n" if pyrepl else "") + SHELL
    path.write_text("model: ollama:llama3\n" + tools + text, encoding="utf-8")
    return load_agent_config(path, environ={})


def policy_of(config: AgentConfig) -> SandboxPolicy | None:
    assert config.sandbox is not None
    return config.sandbox.policy()


def test_the_section_becomes_a_policy(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = load(tmp_path, "sandbox:\n  memory_mb: 1024\n  network: true\n  read_only: [data]\n")
    expected = SandboxPolicy(memory_mb=1024, network=True, read_only=(str(tmp_path / "data"),))
    assert policy_of(config) == expected
    assert policy_of(load(tmp_path, "sandbox: true\n")) == SandboxPolicy()
    assert policy_of(load(tmp_path, "sandbox: false\n")) is None
    assert load(tmp_path, "").sandbox is None
    with pytest.raises(ConfigError, match="memory_mb"):
        load(tmp_path, "sandbox: {memory_mb: 0}\n")
    with pytest.raises(ConfigError, match="netwrk"):
        load(tmp_path, "sandbox: {netwrk: true}\n")


async def findings(tmp_path: Path, text: str) -> dict[str, Finding]:
    config = load(tmp_path, text)
    return {f.subject: f for f in await check_config(config, environ={})}


async def test_validate_reports_whether_the_sandbox_isolates(tmp_path: Path) -> None:
    found = await findings(tmp_path, "")
    assert found["sandbox"].level == ("ok" if isolation().binary else "warning")
    assert "runs in a private directory" in found["pyrepl"].message
    off = await findings(tmp_path, "sandbox: false\n")
    assert off["sandbox"].level == "warning"
    assert "runs in the current directory" in off["pyrepl"].message
    missing = await findings(tmp_path, "sandbox: {writable: [nowhere]}\n")
    assert missing["sandbox"].level == "problem"
    assert f"{tmp_path / 'nowhere'} does not exist" in missing["sandbox"].message


async def tools_of(config: AgentConfig, stack: AsyncExitStack) -> dict[str, Any]:
    return {getattr(t, "name", ""): t for t in await build_toolkit(config, stack)}


@pytest.mark.skipif(isolation().binary is None, reason="bubblewrap cannot run here")
async def test_the_kernel_and_the_shell_tools_run_under_the_policy(tmp_path: Path) -> None:
    config = load(tmp_path, "sandbox:\n  memory_mb: 1024\n")
    async with AsyncExitStack() as stack:
        tools = await tools_of(config, stack)
        code = "import resource\nresource.getrlimit(resource.RLIMIT_AS)[0]"
        result = await tools["execute_code"].invoke({"code": code})
        assert str(1024**3) in str(result)
        shell = tools["count"]
        assert isinstance(shell, ShellTool)
        assert shell.sandbox == SandboxPolicy(memory_mb=1024)
        # Its own PID namespace: the host's processes are invisible.
        assert len([n for n in (await shell.run()).split() if n.isdigit()]) < 10
    async with AsyncExitStack() as stack:
        plain = await tools_of(load(tmp_path, "sandbox: {shell: false}\n", pyrepl=False), stack)
        assert plain["count"].sandbox is None
