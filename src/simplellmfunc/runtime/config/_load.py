"""``load_agent_config``: file + environment + overrides → a validated :class:`AgentConfig`.

A config that does not validate raises one :class:`ConfigError` listing every problem, one per
line, each naming where the value came from (``agent.yml:12``, ``$SIMPLELLMFUNC_LIMITS__MAX_STEPS``,
``override max_steps``), the key and what is wrong::

    agent.yml: 2 problems in the agent config
      agent.yml:7: limits.max_steps: Input should be greater than or equal to 1
      agent.yml:9: memory.stroe: unknown key (did you mean 'store'?)
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ...exceptions import ConfigError
from ._file import KeyPath, dotted, read_config_file
from ._precedence import Layer, env_layer, file_layer, merge_layers, override_layer
from ._schema import AgentConfig
from ._shapes import use_this_python

__all__ = ["ConfigProblem", "load_agent_config"]


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One problem of a config: where the value came from, its key, what is wrong."""

    where: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.key}: {self.message}"


def load_agent_config(
    path: str | Path,
    *,
    overrides: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    """Read ``path`` and apply the environment and ``overrides`` over it (see :mod:`._precedence`).

    Args:
        path: The agent config file (``.yml`` / ``.yaml``, ``.toml`` or ``.json``).
        overrides: Command-line settings (highest precedence).
        environ: Variables to read instead of ``os.environ``.

    Raises:
        ConfigError: For an unreadable file, a syntax error, or settings that do not
            validate (every problem, with its key and line).
    """
    file = Path(path)
    source = read_config_file(file)
    defaults = Layer("defaults", {"name": _default_name(file)}, "defaults")
    layers = [
        defaults,
        file_layer(source.data, file, source.lines),
        env_layer(environ),
        override_layer(overrides or {}),
    ]
    merged, owners = merge_layers(layers)
    use_this_python(merged)
    try:
        config = AgentConfig.model_validate(merged)
    except ValidationError as exc:
        problems = _validation_problems(exc, merged, owners, layers[1])
        raise ConfigError(_report(file, problems)) from None
    semantic = [
        ConfigProblem(_where(key, owners, layers[1]), dotted(key), message)
        for key, message in semantic_problems(config)
    ]
    if semantic:
        raise ConfigError(_report(file, semantic))
    return config


def _default_name(path: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem).strip("-.") or "agent"
    return name[:64]


def _report(path: Path, problems: list[ConfigProblem]) -> str:
    if len(problems) == 1:
        return str(problems[0])
    lines = "\n".join(f"  {p}" for p in problems)
    return f"{path}: {len(problems)} problems in the agent config\n{lines}"


def _where(key: KeyPath, owners: Mapping[KeyPath, Layer], file: Layer) -> str:
    """The source of the value at ``key``: the layer that set it (or its nearest ancestor)."""
    for end in range(len(key), -1, -1):
        layer = owners.get(key[:end])
        if layer is not None and layer.kind != "defaults":
            return layer.where(key)
    return file.where(key) if key[:1] in file.lines else file.label


def _clean_loc(loc: tuple[Any, ...], data: object, names_key: bool) -> KeyPath:
    """The error's location as a path of the data, without the tags of union branches
    (``dict[str,any]``); ``names_key``: the last part is a key (missing or unknown)."""
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
        elif names_key and index == len(loc) - 1:
            node = None
        else:
            continue  # a union branch tag
        path.append(part)
    return tuple(path)


def _model_at(key: KeyPath) -> type[BaseModel] | None:
    """The config model that holds the keys under ``key``."""
    model: type[BaseModel] | None = AgentConfig
    for part in key:
        if isinstance(part, int) or model is None:
            continue
        info = model.model_fields.get(part)
        model = _model_in(info.annotation) if info is not None else None
    return model


def _model_in(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _message(error: Mapping[str, object], key: KeyPath) -> str:
    if error["type"] == "extra_forbidden":
        model = _model_at(key[:-1])
        known = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(str(key[-1]), known, n=1)
        if close:
            return f"unknown key (did you mean {close[0]!r}?)"
        return f"unknown key (known keys: {', '.join(known)})" if known else "unknown key"
    if error["type"] == "missing":
        return "missing (required)"
    return str(error["msg"]).removeprefix("Value error, ")


def _validation_problems(
    exc: ValidationError, data: object, owners: Mapping[KeyPath, Layer], file: Layer
) -> list[ConfigProblem]:
    by_key: dict[KeyPath, list[str]] = {}
    for error in exc.errors(include_url=False):
        names_key = error["type"] in ("missing", "extra_forbidden")
        key = _clean_loc(tuple(error["loc"]), data, names_key)
        message = _message(error, key)
        if message not in by_key.setdefault(key, []):
            by_key[key].append(message)
    return [
        ConfigProblem(_where(key, owners, file), dotted(key), ", or ".join(messages))
        for key, messages in by_key.items()
    ]


def semantic_problems(config: AgentConfig) -> list[tuple[tuple[str | int, ...], str]]:
    """Problems no single field shows: ``(path of the key to blame, message)`` pairs."""
    problems: list[tuple[tuple[str | int, ...], str]] = []
    if config.kind == "chain" and not config.chain:
        problems.append((("kind",), "a chain agent needs 'chain': a list of stage prompts"))
    if config.kind != "chain" and config.chain:
        problems.append((("chain",), f"only a chain agent has stages; this one is {config.kind}"))
    if config.kind == "group" and len(config.agents) < 2:
        problems.append((("agents",), "a group agent needs 'agents': two or more config files"))
    if config.kind == "parallel" and not config.agents:
        problems.append((("agents",), "a parallel agent needs 'agents': config files"))
    if config.kind not in ("group", "parallel") and config.agents:
        problems.append(
            (
                ("agents",),
                f"only group and parallel agents have member agents; this one is {config.kind}",
            )
        )
    if config.handoffs and config.kind in ("chain", "group", "parallel"):
        problems.append((("handoffs",), f"a {config.kind} agent cannot hand off; use kind: react"))
    if config.kind == "simple" and not config.toolkit.is_empty():
        problems.append((("toolkit",), "a simple agent calls no tools; use kind: react"))
    if config.kind != "react" and config.skills_section.paths:
        problems.append((("skills",), "only a react agent loads skills (they are tools)"))
    memory = config.memory
    if memory.store == "sqlite" and not memory.path:
        problems.append((("memory", "store"), "a sqlite store needs memory.path"))
    if memory.store == "redis" and not memory.url:
        problems.append((("memory", "store"), "a redis store needs memory.url"))
    if config.checkpoints.every and not config.checkpoints.dir:
        problems.append((("checkpoints", "every"), "checkpoints need checkpoints.dir"))
    names = [t.name for t in config.toolkit.shell] + [t.name for t in config.toolkit.agents]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        problems.append((("toolkit",), f"two tools are named {duplicate!r}"))
    return problems
