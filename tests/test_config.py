"""Agent config files: formats, errors with key and line, and precedence (command line >
environment > file > defaults) for every section."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from simplellmfunc.engine import EngineOptions, HistoryWindow, TerminationPolicy
from simplellmfunc.exceptions import ConfigError
from simplellmfunc.runtime import AgentConfig, load_agent_config
from simplellmfunc.runtime.config import build_llm, build_options

BASE = "model: deepseek:deepseek-chat\n"


def write(tmp_path: Path, text: str, name: str = "agent.yml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def load(path: Path, env: dict[str, str] | None = None, **overrides: Any) -> AgentConfig:
    return load_agent_config(path, overrides=overrides, environ=env or {})


def problems(path: Path, env: dict[str, str] | None = None, **overrides: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        load(path, env, **overrides)
    return str(caught.value)


# --- formats ------------------------------------------------------------------------------


def test_minimal_file_gets_the_defaults(tmp_path: Path) -> None:
    config = load(write(tmp_path, BASE, "my agent.yml"))
    assert config.name == "my-agent"  # the file's stem, made a valid name
    assert (config.kind, config.tool_protocol) == ("react", "auto")
    assert config.model.preset == "deepseek:deepseek-chat"
    assert (config.limits.max_steps, config.limits.tool_timeout) == (10, 30.0)
    assert config.memory.store == "none"
    assert config.toolkit.is_empty()


def test_yaml_toml_and_json_say_the_same(tmp_path: Path) -> None:
    yaml_file = write(
        tmp_path,
        "model: openai:gpt-4o\nlimits:\n  max_steps: 3\ntoolkit:\n  shell:\n"
        "    - {name: ls, command: 'ls {}'}\n",
        "a.yaml",
    )
    toml_file = write(
        tmp_path,
        'model = "openai:gpt-4o"\n[limits]\nmax_steps = 3\n[[toolkit.shell]]\n'
        'name = "ls"\ncommand = "ls {}"\n',
        "a.toml",
    )
    json_file = write(
        tmp_path,
        '{"model": "openai:gpt-4o", "limits": {"max_steps": 3},\n'
        ' "toolkit": {"shell": [{"name": "ls", "command": "ls {}"}]}}',
        "a.json",
    )
    configs = [load(f).model_copy(update={"name": "x"}) for f in (yaml_file, toml_file, json_file)]
    assert configs[0] == configs[1] == configs[2]


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.yml", "model: x\nlimits: [1\n", "a.yml:3:1: invalid YAML"),
        ("a.yml", "model: x\nkind: react\nkind: simple\n", "a.yml:3: kind: duplicate key"),
        ("a.json", '{\n  "model": "x",\n}', "a.json:3:1: invalid JSON"),
        ("a.toml", 'model = "x"\nkind = \n', "a.toml: invalid TOML"),
        ("a.yml", "- just\n- a list\n", "a.yml:1: the file must hold a mapping"),
    ],
)
def test_syntax_errors_name_the_line(tmp_path: Path, name: str, text: str, expected: str) -> None:
    assert expected in problems(write(tmp_path, text, name))


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    assert "cannot read agent config" in problems(tmp_path / "nope.yml")


# --- validation errors: key and line, never a traceback --------------------------------------


BAD_YAML = """\
name: demo
model: deepseek:deepseek-chat
limits:
  max_steps: 0
memory:
  stroe: sqlite
toolkit:
  shell:
    - name: ok
      command: echo {}
    - name: bad name
"""


def test_every_problem_names_key_and_line(tmp_path: Path) -> None:
    text = problems(write(tmp_path, BAD_YAML))
    path = str(tmp_path / "agent.yml")
    assert text.splitlines()[0] == f"{path}: 4 problems in the agent config"
    assert f"{path}:4: limits.max_steps: Input should be greater than or equal to 1" in text
    assert f"{path}:6: memory.stroe: unknown key (did you mean 'store'?)" in text
    assert f"{path}:11: toolkit.shell[1].name: String should match pattern" in text
    assert f"{path}:11: toolkit.shell[1].command: missing (required)" in text
    assert "Traceback" not in text


def test_toml_and_json_errors_have_lines_too(tmp_path: Path) -> None:
    toml = write(
        tmp_path,
        'model = "x:y"\nsystem = """\nlimits = 1\n"""\n[limits]\nmax_steps = -1\n'
        '[[toolkit.shell]]\nname = "a"\ncommand = "ls"\n'
        '[[toolkit.shell]]\nname = "b"\ntimeout = 0\ncommand = "ls"\n',
        "a.toml",
    )
    text = problems(toml)
    assert "a.toml:6: limits.max_steps:" in text
    assert "a.toml:12: toolkit.shell[1].timeout:" in text
    json_file = write(
        tmp_path,
        '{"model": {"preset": "x:y",\n  "temperature": "hot"},\n "kind": "loop"}',
        "a.json",
    )
    text = problems(json_file)
    assert "a.json:2: model.temperature: Input should be a valid number" in text
    kinds = "'simple', 'react', 'chain', 'group' or 'parallel'"
    assert f"a.json:3: kind: Input should be {kinds}" in text


def test_json_that_yaml_cannot_read_still_gets_lines(tmp_path: Path) -> None:
    text = problems(write(tmp_path, '{\t"model": "x:y",\n\t"kind":\t"loop"}', "a.json"))
    assert "a.json:2: kind:" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BASE + "kind: chain\n", "agent.yml:2: kind: a chain agent needs 'chain'"),
        (BASE + "chain: [a]\n", "agent.yml:2: chain: only a chain agent has stages"),
        (BASE + "kind: simple\ntoolkit:\n  files: .\n", "agent.yml:3: toolkit: a simple agent"),
        (BASE + "memory:\n  store: sqlite\n", "agent.yml:3: memory.store: a sqlite store needs"),
        (BASE + "memory: {store: redis}\n", "agent.yml:2: memory.store: a redis store needs"),
        (BASE + "checkpoints: {every: 2}\n", "checkpoints.every: checkpoints need"),
        (
            BASE
            + "toolkit:\n  shell: [{name: a, command: x}]\n  agents: [{name: a, command: y}]\n",
            "toolkit: two tools are named 'a'",
        ),
        ("system: hi\n", "agent.yml: model: missing (required)"),
        ("model: {base_url: x}\n", "agent.yml:1: model: name a model"),
        ("model: {preset: a:b, provider_file: p.json}\n", "model: give either 'preset'"),
    ],
)
def test_problems_across_keys(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in problems(write(tmp_path, text))


def test_environment_problems_name_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    text = problems(path, {"SIMPLELLMFUNC_TRACE__MAX_CHARS": "many"})
    assert text.startswith("$SIMPLELLMFUNC_TRACE__MAX_CHARS: trace.max_chars: ")
    text = problems(path, max_steps=0)
    assert text.startswith("override max_steps: limits.max_steps: ")
    text = problems(path, set=["limits.tool_timeout=-1"])
    assert text.startswith("--set limits.tool_timeout=-1: limits.tool_timeout: ")


def test_bad_overrides_are_config_errors(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    assert "unknown override 'colour'" in problems(path, colour="blue")
    assert "write KEY=VALUE" in problems(path, set=["limits.max_steps"])


# --- precedence, section by section -------------------------------------------------------


FULL = """\
name: from-file
description: file
kind: react
model:
  preset: deepseek:deepseek-chat
  base_url: http://file.example/v1
  temperature: 0.1
system: file system
tool_protocol: native
toolkit:
  files: ./ws
  mcp_timeout: 10
  shell: [{name: f, command: echo file}]
memory: {store: memory, session: file, recent: 1}
limits: {max_steps: 4, tool_timeout: 11}
termination: {signals: [file], implicit: false}
history: {keep_recent_turns: 4, strategy: truncate}
trace: {timeline: false, max_chars: 100}
checkpoints: {dir: cps, every: 1, max: 3}
"""

# (accessor, environment variable and value, override, expected from file / env / override)
SECTIONS: list[tuple[str, tuple[str, str], dict[str, Any], tuple[Any, Any, Any]]] = [
    ("name", ("NAME", "from-env"), {"name": "from-cli"}, ("from-file", "from-env", "from-cli")),
    ("description", ("DESCRIPTION", "env"), {"description": "cli"}, ("file", "env", "cli")),
    (
        "model.preset",
        ("MODEL", "openai:gpt-4o"),
        {"model": "anthropic:c"},
        ("deepseek:deepseek-chat", "openai:gpt-4o", "anthropic:c"),
    ),
    (
        "model.base_url",
        ("MODEL__BASE_URL", "http://env/v1"),
        {"set": ["model.base_url=http://c/v1"]},
        ("http://file.example/v1", "http://env/v1", "http://c/v1"),
    ),
    (
        "model.temperature",
        ("MODEL__TEMPERATURE", "0.5"),
        {"model": {"temperature": 0.9}},
        (0.1, 0.5, 0.9),
    ),
    (
        "system",
        ("SYSTEM", "env: system"),
        {"system": "cli system"},
        ("file system", "env: system", "cli system"),
    ),
    (
        "tool_protocol",
        ("TOOL_PROTOCOL", "text"),
        {"tool_protocol": "auto"},
        ("native", "text", "auto"),
    ),
    (
        "toolkit.mcp_timeout",
        ("TOOLKIT__MCP_TIMEOUT", "20"),
        {"toolkit": {"mcp_timeout": 30}},
        (10, 20, 30),
    ),
    (
        "toolkit.shell.0.command",
        ("TOOLKIT__SHELL", '[{"name": "e", "command": "echo env"}]'),
        {"set": ['toolkit.shell=[{"name": "c", "command": "echo cli"}]']},
        ("echo file", "echo env", "echo cli"),
    ),
    ("memory.session", ("MEMORY__SESSION", "env"), {"session": "cli"}, ("file", "env", "cli")),
    ("memory.recent", ("MEMORY__RECENT", "2"), {"memory": {"recent": 3}}, (1, 2, 3)),
    ("limits.max_steps", ("LIMITS__MAX_STEPS", "5"), {"max_steps": 6}, (4, 5, 6)),
    ("limits.tool_timeout", ("LIMITS__TOOL_TIMEOUT", "12"), {"tool_timeout": 13}, (11, 12, 13)),
    (
        "termination.signals",
        ("TERMINATION__SIGNALS", "[env]"),
        {"termination": {"signals": ["cli"]}},
        (["file"], ["env"], ["cli"]),
    ),
    (
        "termination.implicit",
        ("TERMINATION__IMPLICIT", "true"),
        {"set": ["termination.implicit=null"]},
        (False, True, None),
    ),
    (
        "history.keep_recent_turns",
        ("HISTORY__KEEP_RECENT_TURNS", "5"),
        {"history": {"keep_recent_turns": 6}},
        (4, 5, 6),
    ),
    ("trace.timeline", ("TRACE__TIMELINE", "false"), {"timeline": True}, (False, False, True)),
    (
        "trace.max_chars",
        ("TRACE__MAX_CHARS", "200"),
        {"trace": {"max_chars": 300}},
        (100, 200, 300),
    ),
    ("checkpoints.every", ("CHECKPOINTS__EVERY", "2"), {"checkpoints": {"every": 3}}, (1, 2, 3)),
    ("checkpoints.max", ("CHECKPOINTS__MAX", "4"), {"set": ["checkpoints.max=5"]}, (3, 4, 5)),
]


def _get(config: Any, accessor: str) -> Any:
    value = config
    for part in accessor.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return value


@pytest.mark.parametrize(
    ("accessor", "env", "override", "expected"), SECTIONS, ids=[s[0] for s in SECTIONS]
)
def test_precedence_of_every_section(
    tmp_path: Path,
    accessor: str,
    env: tuple[str, str],
    override: dict[str, Any],
    expected: tuple[Any, Any, Any],
) -> None:
    path = write(tmp_path, FULL)
    environ = {f"SIMPLELLMFUNC_{env[0]}": env[1]}
    assert _get(load(path), accessor) == expected[0]
    assert _get(load(path, environ), accessor) == expected[1]
    assert _get(load(path, environ, **override), accessor) == expected[2]
    # No layer silently wins over a higher one: the override without the environment too.
    assert _get(load(path, None, **override), accessor) == expected[2]


def test_precedence_of_the_kind(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "kind: simple\nchain: [a, b]\n")
    environ = {"SIMPLELLMFUNC_KIND": "chain"}
    assert "only a chain agent" in problems(path)
    assert load(path, environ).kind == "chain"
    assert "only a chain agent" in problems(path, environ, kind="react")


def test_precedence_of_the_chain(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "kind: chain\nchain: [file]\n")
    environ = {"SIMPLELLMFUNC_CHAIN": '["env one", "env two"]'}
    assert [s.prompt for s in load(path).chain] == ["file"]
    assert [s.prompt for s in load(path, environ).chain] == ["env one", "env two"]
    assert [s.prompt for s in load(path, environ, chain=["cli"]).chain] == ["cli"]


def test_defaults_are_the_lowest_layer(tmp_path: Path) -> None:
    path = write(tmp_path, BASE)
    assert load(path).limits.max_steps == 10
    assert load(path, {"SIMPLELLMFUNC_LIMITS__MAX_STEPS": "2"}).limits.max_steps == 2


def test_switching_a_tool_off_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "toolkit:\n  pyrepl: true\n  files: .\n")
    config = load(path)
    assert config.toolkit.pyrepl is not None
    assert config.toolkit.files is not None
    config = load(path, {"SIMPLELLMFUNC_TOOLKIT__PYREPL": "false"}, set=["toolkit.files=false"])
    assert config.toolkit.pyrepl is None
    assert config.toolkit.files is None


def test_a_model_name_alone_keeps_the_provider(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    config = load(path, model="deepseek-reasoner")
    assert config.model.preset == "deepseek:deepseek-reasoner"
    assert config.model.base_url == "http://file.example/v1"  # kept: only the model changed
    config = load(path, model="ollama:llama3:8b")
    assert config.model.preset == "ollama:llama3:8b"
    provider_file = write(
        tmp_path, "model: {provider_file: p.json, provider: acme, model: small}\n", "b.yml"
    )
    config = load(provider_file, model="large")
    assert (config.model.provider, config.model.model) == ("acme", "large")
    assert config.model.provider_file == str(tmp_path / "p.json")


def test_model_text_and_model_keys_in_one_layer(tmp_path: Path) -> None:
    path = write(tmp_path, FULL)
    env = {"SIMPLELLMFUNC_MODEL": "openai:gpt-4o", "SIMPLELLMFUNC_MODEL__TIMEOUT": "9"}
    model = load(path, env).model
    assert (model.preset, model.timeout) == ("openai:gpt-4o", 9)
    assert (model.base_url, model.temperature) == ("http://file.example/v1", 0.1)
    model = load(path, env, set=["model=gpt-4o-mini", "model.max_tokens=5"]).model
    assert (model.preset, model.max_tokens, model.timeout) == ("openai:gpt-4o-mini", 5, 9)


def test_tools_from_the_command_line_add_to_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        BASE
        + "toolkit:\n  agents:\n    - {name: a, command: one}\n    - {name: b, command: two}\n",
    )
    config = load(path, tools=[("b", "three"), ("c", "four")])
    assert [(a.name, a.command) for a in config.toolkit.agents] == [
        ("a", "one"),
        ("b", "three"),
        ("c", "four"),
    ]


def test_paths_are_relative_to_the_file_or_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    path = write(
        folder,
        BASE
        + "memory: {store: sqlite, path: m.db}\ntrace: {file: t.jsonl}\n"
        + "toolkit:\n  files: ws\n  mcpServers:\n    demo: {command: python, args: [s.py]}\n"
        + "    web: {url: 'http://127.0.0.1:1/mcp'}\n",
    )
    monkeypatch.chdir(tmp_path)
    config = load(path, {"SIMPLELLMFUNC_TRACE__FILE": "env.jsonl"})
    assert config.memory.path == str(folder / "m.db")
    assert config.trace.file == str(tmp_path / "env.jsonl")  # the environment's: the cwd's
    assert config.toolkit.files is not None
    assert config.toolkit.files.workspace == str(folder / "ws")
    servers = config.toolkit.mcpServers
    assert isinstance(servers, dict)
    assert servers["demo"]["cwd"] == str(folder)  # a stdio server runs next to its config
    assert "cwd" not in servers["web"]
    assert load(path, trace_file="cli.jsonl").trace.file == str(tmp_path / "cli.jsonl")


def test_shorthands(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "model: a:b\nkind: chain\nchain: ['first {input}', {prompt: second, name: two}]\n"
        "memory: memory\n",
    )
    config = load(path)
    assert [s.prompt for s in config.chain] == ["first {input}", "second"]
    assert config.chain[1].name == "two"
    assert config.memory.store == "memory"


# --- building the model ---------------------------------------------------------------------


async def test_model_keys_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {preset: 'openai:gpt-4o', api_key_env: MY_KEY}\n")
    config = load(path)
    with pytest.raises(ConfigError, match="MY_KEY is not set"):
        build_llm(config.model, {})
    llm = build_llm(config.model, {"MY_KEY": "sk-secret-123456"})
    assert llm.model_name == "gpt-4o"
    assert "sk-secret-123456" not in repr(llm)
    await llm.aclose()
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        build_llm(load(write(tmp_path, "model: openai:gpt-4o\n")).model, {})


async def test_model_from_a_provider_file(tmp_path: Path) -> None:
    (tmp_path / "provider.json").write_text(
        '{"acme": [{"model_name": "small", "api_keys": ["sk-a-123456789"],'
        ' "base_url": "http://127.0.0.1:9/v1"},'
        ' {"model_name": "large", "api_keys": ["sk-b-123456789"], "base_url": "http://x/v1"}]}'
    )
    path = write(
        tmp_path,
        "model:\n  provider_file: provider.json\n  provider: acme\n  model: small\n"
        "  temperature: 0.2\n  capabilities: {json_schema: false}\n",
    )
    llm = build_llm(load(path).model, {})
    assert (llm.model_name, llm.provider_name) == ("small", "acme")
    assert llm.capabilities.json_schema is False
    await llm.aclose()
    missing = load(path, model="huge").model
    with pytest.raises(ConfigError, match=r"no model 'huge' under 'acme'.*large, small"):
        build_llm(missing, {})


def test_unknown_capabilities_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "model: {preset: 'ollama:m', capabilities: {telepathy: true}}\n")
    with pytest.raises(ConfigError, match="unknown 'telepathy'"):
        build_llm(load(path).model, {})


def test_engine_options_of_a_config_file(tmp_path: Path) -> None:
    text = BASE + (
        "tool_protocol: text\nkeyword_heuristic: true\n"
        "limits:\n  max_steps: 4\n  loop_window: 5\n  max_tool_concurrency: 2\n"
        "termination:\n  implicit: false\nhistory:\n  keep_recent_turns: 3\n"
    )
    options = build_options(load(write(tmp_path, text)), tools=True)
    assert options == EngineOptions(
        max_tool_calls=3,
        tool_timeout=30.0,
        max_tool_concurrency=2,
        tool_protocol="text",
        keyword_heuristic=True,
        termination=TerminationPolicy(implicit=False),
        history_window=HistoryWindow(keep_recent_turns=3),
        loop_window=5,
    )
    assert build_options(load(write(tmp_path, BASE)), tools=False).max_tool_calls is None


def test_the_durable_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "model: openai:gpt-4o-mini\ndurable:\n  path: runs/durable.sqlite\n"
        "  queues:\n    sessions: {worker_concurrency: 2, rate_limit: 10, rate_period: 60}\n",
        "agent.yml",
    )
    durable = load(path).durable
    assert durable is not None
    assert durable.path == str(tmp_path / "runs" / "durable.sqlite")  # relative to the file
    assert durable.queues["sessions"].worker_concurrency == 2
    assert (durable.heartbeat, durable.dead_after) == (5.0, 30.0)
    assert load(write(tmp_path, "model: openai:x\n", "plain.yml")).durable is None
    bad = write(tmp_path, "model: openai:x\ndurable:\n  queues: {q: {workers: 2}}\n", "bad.yml")
    assert "durable.queues.q.workers" in problems(bad)
