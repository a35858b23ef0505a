"""A bare ``python`` / ``python3`` in an agent config means the interpreter running the agent
(the project's virtualenv), not whatever ``python`` comes first on PATH."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from simplellmfunc.runtime import load_agent_config


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


CONFIG = """\
model: openai:m
toolkit:
  mcpServers:
    bare: {command: python, args: [server.py]}
    three: {command: python3, args: [server.py]}
    other: {command: /opt/python/bin/python, args: [server.py]}
    node: {command: node, args: [server.js]}
  shell:
    - {name: py, command: 'python -c "print({x})"'}
    - {name: py3, command: 'python3 -c "print(1)"'}
    - {name: pyish, command: 'pythonista run'}
  agents:
    - {name: sub, command: 'python -m simplellmfunc run worker.yml --quiet -'}
"""


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return write(tmp_path / "agent.yml", CONFIG)


def test_bare_python_commands_run_this_interpreter(config_file: Path) -> None:
    config = load_agent_config(config_file, environ={})
    servers = config.toolkit.mcpServers
    assert isinstance(servers, dict)
    assert servers["bare"]["command"] == sys.executable
    assert servers["three"]["command"] == sys.executable
    assert servers["other"]["command"] == "/opt/python/bin/python"  # a path is kept as given
    assert servers["node"]["command"] == "node"
    me = shlex.quote(sys.executable)
    shell = {t.name: t.command for t in config.toolkit.shell}
    assert shell["py"] == f'{me} -c "print({{x}})"'
    assert shell["py3"] == f'{me} -c "print(1)"'
    assert shell["pyish"] == "pythonista run"
    assert config.toolkit.agents[0].command == f"{me} -m simplellmfunc run worker.yml --quiet -"


def test_command_line_tools_too(tmp_path: Path) -> None:
    config = load_agent_config(
        write(tmp_path / "a.yml", "model: openai:m\n"),
        overrides={"tools": [("sub", "python -m simplellmfunc run w.yml -")]},
        environ={},
    )
    assert config.toolkit.agents[0].command.startswith(shlex.quote(sys.executable) + " -m")
