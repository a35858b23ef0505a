"""``check_config``: what can be checked about an agent config without running it, offline.

A config that loads (:func:`~._load.load_agent_config`) can still not work: its MCP server
script is missing, its shell tool's command is not installed, its memory file cannot be made.
:func:`check_config` looks at everything it can without the network and without starting
anything, and says what it could not look at::

    ok         model: deepseek:deepseek-chat (https://api.deepseek.com/v1)
    warning    model key: not set (DEEPSEEK_API_KEY); not checked online
    ok         mcp server demo: /work/.venv/bin/python; ../demo_server.py (not started)
    ok         memory: .simplellmfunc/memory.db (its folder will be created)
    unchecked  not checked offline: the model endpoint and key, MCP servers starting ...

Nothing is created, started or contacted. ``problem`` findings are why the agent cannot work;
``warning`` findings may be fine (a key set only where the agent really runs).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

from ...exceptions import ConfigError, SkillError
from ...providers import PRESETS, env_settings
from ...sandbox import Isolation, isolation
from ..skills import SkillRegistry
from ._build import build_llm
from ._schema import AgentConfig, ModelConfig
from ._toolkit import SandboxConfig

__all__ = ["Finding", "check_config"]

Level = Literal["ok", "warning", "problem", "unchecked"]

#: Shell words that are no program on PATH (builtins and syntax).
_SHELL_WORDS = frozenset({"!", ".", ":", "[", "[[", "{", "(", "alias", "case", "cd", "command"})
_SHELL_WORDS |= {"echo", "eval", "exec", "exit", "export", "for", "if", "printf", "pwd", "read"}
_SHELL_WORDS |= {"set", "source", "test", "type", "ulimit", "umask", "unset", "until", "while"}
#: Arguments that name a script file the server runs.
_SCRIPT_SUFFIXES = (".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".jar")
_PLACEHOLDER_KEY = "placeholder-key-for-an-offline-check"


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing :func:`check_config` looked at (or could not).

    Attributes:
        level: ``ok``; ``warning`` (may still work); ``problem`` (cannot work as configured);
            ``unchecked`` (needs the network or a start, so not looked at).
        subject: What was checked (``model key``, ``mcp server demo`` ...).
        message: What was found.
    """

    level: Level
    subject: str
    message: str

    def __str__(self) -> str:
        return f"{self.level:<9}  {self.subject}: {self.message}"


async def check_config(
    config: AgentConfig, *, environ: Mapping[str, str] | None = None
) -> list[Finding]:
    """Check ``config`` offline: the model (preset, key, provider file), each tool's command,
    scripts and folders, and the files of memory, trace and checkpoints.

    Args:
        config: A loaded config.
        environ: Variables to read keys from instead of the environment and ``./.env``.

    Returns:
        The findings, in config order, ending with what was not checked.
    """
    env = env_settings(environ)
    findings: list[Finding] = []
    findings += await _model(config.model, env, "model")
    for index, fallback in enumerate(config.model.fallback):
        findings += await _model(fallback, env, f"fallback model {index + 1}")
    if config.kind != "chain":
        isolated = await anyio.to_thread.run_sync(isolation)  # runs a throwaway sandbox once
        findings += _toolkit(config, env, isolated)
    findings += _files(config)
    if config.knowledge is not None and config.kind != "chain":
        findings += _knowledge(config)
    findings.append(Finding("unchecked", "not checked offline", _unchecked(config)))
    return findings


# --- the model ------------------------------------------------------------------------------


async def _model(model: ModelConfig, env: dict[str, str], subject: str) -> list[Finding]:
    found: list[Finding] = []
    variable, required, where = _key_source(model, env)
    if model.preset is not None:
        name = model.preset.partition(":")[0].strip().lower()
        if name not in PRESETS:
            known = ", ".join(sorted(PRESETS))
            return [Finding("problem", subject, f"unknown provider {name!r} (known: {known})")]
        if name == "claude-code":
            return [_claude_cli(subject)]
    if variable is not None:
        if env.get(variable, "").strip():
            found.append(Finding("ok", f"{subject} key", f"set ({variable})"))
        elif required:
            message = f"not set ({variable}); not checked online"
            found.append(Finding("warning", f"{subject} key", message))
        else:
            found.append(Finding("ok", f"{subject} key", f"none needed ({variable} not set)"))
    try:
        # A placeholder stands in for a missing key, so the rest is still checked.
        trial = {**env, variable: _PLACEHOLDER_KEY} if variable and not env.get(variable) else env
        llm = build_llm(model.model_copy(update={"fallback": []}), trial)
        await llm.aclose()
    except ConfigError as exc:
        found.insert(0, Finding("problem", subject, str(exc)))
        return found
    label = model.preset or f"{model.provider}:{model.model} from {model.provider_file}"
    found.insert(0, Finding("ok", subject, f"{label} ({where})" if where else label))
    return found


def _key_source(model: ModelConfig, env: Mapping[str, str]) -> tuple[str | None, bool, str]:
    """(the variable holding the key, whether a key is required, the endpoint)."""
    if model.preset is None:
        return model.api_key_env, True, model.base_url or ""
    preset = PRESETS.get(model.preset.partition(":")[0].strip().lower())
    if preset is None:
        return None, False, ""
    url = model.base_url or env.get(preset.base_url_env or "", "").strip() or preset.base_url
    return model.api_key_env or preset.key_env, preset.key_required, url


def _claude_cli(subject: str) -> Finding:
    found = shutil.which("claude")
    if found is None:
        return Finding("problem", subject, "the `claude` command is not on PATH")
    return Finding("ok", subject, f"claude-code ({found}); its login is not checked")


# --- tools ----------------------------------------------------------------------------------


def _toolkit(config: AgentConfig, env: Mapping[str, str], isolated: Isolation) -> list[Finding]:
    toolkit = config.toolkit
    found: list[Finding] = []
    if toolkit.pyrepl is not None:
        found.append(_pyrepl(toolkit.pyrepl.working_directory, config.sandbox))
    sandboxed_shell = config.sandbox is not None and config.sandbox.shell and toolkit.shell
    if toolkit.pyrepl is not None or sandboxed_shell:
        found.append(_sandbox(config.sandbox, isolated))
    if toolkit.files is not None:
        found.append(_existing_folder("files workspace", toolkit.files.workspace))
    for shell in toolkit.shell:
        found.append(_command(f"shell tool {shell.name}", shell.command, shell.cwd, env))
    for agent in toolkit.agents:
        found.append(_command(f"agent tool {agent.name}", agent.command, agent.cwd, env))
    if toolkit.mcpServers:
        found += _mcp(toolkit.mcpServers, env)
    found += _skills(config.skills_section.paths)
    return found


def _skills(paths: list[str]) -> list[Finding]:
    found: list[Finding] = []
    for path in paths:
        try:
            names = [s.name for s in SkillRegistry(dirs=[path])]
        except SkillError as exc:
            found.append(Finding("problem", f"skills {path}", str(exc)))
            continue
        text = ", ".join(names) if names else "no skill folder (SKILL.md) found"
        found.append(Finding("ok" if names else "warning", f"skills {path}", text))
    return found


def _pyrepl(directory: str | None, sandbox: SandboxConfig | None) -> Finding:
    if importlib.util.find_spec("ipykernel") is None:
        return Finding("problem", "pyrepl", "ipykernel is not installed")
    if directory is not None and not Path(directory).is_dir():
        return Finding("problem", "pyrepl", f"working directory {directory} does not exist")
    unsandboxed = sandbox is not None and not sandbox.enabled
    where = directory or ("the current directory" if unsandboxed else "a private directory")
    return Finding("ok", "pyrepl", f"ipykernel installed; runs in {where} (not started)")


def _sandbox(section: SandboxConfig | None, found: Isolation) -> Finding:
    """Whether the sandbox can isolate here (``found``: what bubblewrap can do)."""
    if section is not None and not section.enabled:
        return Finding(
            "warning", "sandbox", "off: the Python kernel runs with the host user's access"
        )
    for path in [] if section is None else [*section.read_only, *section.writable]:
        if not Path(path).exists():
            return Finding("problem", "sandbox", f"{path} does not exist")
    missing = found.missing()
    if found.binary is not None:
        gaps = f"; missing: {'; '.join(missing)}" if missing else ""
        return Finding("warning" if missing else "ok", "sandbox",
                       f"bubblewrap isolates ({found.binary}){gaps}")  # fmt: skip
    required = section.require_isolation if section is not None else None
    if required or (required is None and os.geteuid() == 0):
        return Finding(
            "problem",
            "sandbox",
            f"isolation is required, but bubblewrap cannot run: {found.reason}",
        )
    return Finding(
        "warning", "sandbox",
        f"bubblewrap cannot run ({found.reason}): only resource limits and a clean environment",
    )  # fmt: skip


def _existing_folder(subject: str, folder: str) -> Finding:
    if Path(folder).is_dir():
        return Finding("ok", subject, folder)
    return Finding("problem", subject, f"{folder} is not an existing folder")


def _program(word: str, cwd: str | None, env: Mapping[str, str]) -> str | None:
    """Where ``word`` runs from: itself when it is a path, else its place on PATH."""
    if os.sep in word:
        path = Path(word) if Path(word).is_absolute() else Path(cwd or ".") / word
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(word, path=env.get("PATH", os.environ.get("PATH")))


def _command(subject: str, command: str, cwd: str | None, env: Mapping[str, str]) -> Finding:
    if cwd is not None and not Path(cwd).is_dir():
        return Finding("problem", subject, f"its cwd {cwd} does not exist")
    try:
        words = shlex.split(command)
    except ValueError:
        return Finding("warning", subject, "the command cannot be split into words; not checked")
    while words and "=" in words[0].partition("/")[0]:  # VAR=value before the command
        words.pop(0)
    if not words or words[0] in _SHELL_WORDS or "{" in words[0]:
        return Finding("ok", subject, "a shell command (not run)")
    program = _program(words[0], cwd, env)
    if program is None:
        return Finding("problem", subject, f"{words[0]!r} is not on PATH")
    return Finding("ok", subject, f"{program} (not run)")


def _mcp(source: dict[str, dict[str, Any]] | str, env: Mapping[str, str]) -> list[Finding]:
    from ...mcp import StdioSpec, load_config

    try:
        specs = load_config({"mcpServers": source} if isinstance(source, dict) else source)
    except ConfigError as exc:
        return [Finding("problem", "mcp servers", str(exc))]
    found = []
    for name, spec in specs.items():
        subject = f"mcp server {name}"
        if isinstance(spec, StdioSpec):
            found.append(_stdio(subject, spec.command, spec.args, spec.cwd, env))
        else:
            found.append(Finding("unchecked", subject, f"{spec.label}: not contacted offline"))
    return found


def _stdio(
    subject: str, command: str, args: Sequence[str], cwd: str | None, env: Mapping[str, str]
) -> Finding:
    if cwd is not None and not Path(cwd).is_dir():
        return Finding("problem", subject, f"its cwd {cwd} does not exist")
    program = _program(command, cwd, env)
    if program is None:
        return Finding("problem", subject, f"{command!r} is not on PATH")
    scripts = [a for a in args if a.endswith(_SCRIPT_SUFFIXES) and not a.startswith("-")]
    for script in scripts:
        path = Path(script) if Path(script).is_absolute() else Path(cwd or ".") / script
        if not path.is_file():
            return Finding("problem", subject, f"its script {script} does not exist (in {cwd})")
    shown = "; ".join([program, *scripts])
    return Finding("ok", subject, f"{shown} (not started)")


# --- files ----------------------------------------------------------------------------------


def _files(config: AgentConfig) -> list[Finding]:
    found: list[Finding] = []
    memory = config.memory
    if memory.store == "sqlite" and memory.path and memory.path != ":memory:":
        found.append(_writable("memory", memory.path, folder=False))
    elif memory.store == "redis":
        if importlib.util.find_spec("redis") is None:
            found.append(Finding("problem", "memory", "the redis package is not installed"))
        else:
            found.append(Finding("unchecked", "memory", "the Redis server is not contacted"))
    if config.trace.file:
        found.append(_writable("trace file", config.trace.file, folder=False))
    if config.checkpoints.dir:
        found.append(_writable("checkpoints", config.checkpoints.dir, folder=True))
    if config.durable is not None:
        found.append(_durable(config))
    return found


def _knowledge(config: AgentConfig) -> list[Finding]:
    section = config.knowledge
    assert section is not None
    found = [
        Finding("ok", "knowledge source", source)
        if Path(source).exists()
        else Finding("problem", "knowledge source", f"{source} does not exist")
        for source in section.sources
    ]
    if section.path and section.path != ":memory:":
        found.append(_writable("knowledge base", section.path, folder=False))
    if section.embeddings is not None and importlib.util.find_spec("sqlite_vec") is None:
        message = "sqlite-vec is not installed (pip install 'simplellmfunc[rag]')"
        found.append(Finding("problem", "knowledge embeddings", message))
    return found


def _durable(config: AgentConfig) -> Finding:
    durable = config.durable
    assert durable is not None
    if importlib.util.find_spec("dbos") is None:
        extra = "pip install 'simplellmfunc[durable]'"
        return Finding("problem", "durable", f"the dbos package is not installed ({extra})")
    if config.kind == "chain":
        return Finding("problem", "durable", "a chain agent cannot run durably (no one chat)")
    if durable.database_url:
        return Finding("unchecked", "durable", "the system database is not contacted")
    return _writable("durable", durable.path, folder=False)


def _writable(subject: str, target: str, *, folder: bool) -> Finding:
    path = Path(target).expanduser()
    if path.exists():
        if folder != path.is_dir():
            kind = "a folder" if folder else "a file"
            return Finding("problem", subject, f"{target} exists and is not {kind}")
        if not os.access(path, os.W_OK):
            return Finding("problem", subject, f"{target} is not writable")
        return Finding("ok", subject, target)
    missing = [p for p in (path, *path.parents) if not p.exists()]
    first_existing = missing[-1].parent
    if not first_existing.is_dir() or not os.access(first_existing, os.W_OK | os.X_OK):
        return Finding("problem", subject, f"{target} cannot be created in {first_existing}")
    made = "it will be created" if folder or len(missing) == 1 else "its folder will be created"
    return Finding("ok", subject, f"{target} ({made})")


def _unchecked(config: AgentConfig) -> str:
    parts = ["the model endpoint and key"]
    toolkit = config.toolkit
    if config.kind != "chain":
        if toolkit.mcpServers:
            parts.append("MCP servers starting and listing tools")
        if toolkit.pyrepl is not None:
            parts.append("the Python kernel starting")
        if toolkit.shell or toolkit.agents:
            parts.append("tool commands running")
        if config.knowledge is not None and config.knowledge.embeddings is not None:
            parts.append("the embeddings endpoint")
    return ", ".join(parts) + " (running the agent checks them)"
