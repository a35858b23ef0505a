"""Where each setting comes from: command line > environment > file > defaults.

The rule holds for every section, because the layers are merged as plain data before pydantic
sees them; nothing reads a setting from one layer only.

* **defaults**: the models' defaults in :mod:`._config`, and ``name`` = the file's stem.
* **file**: the agent config file; relative paths in it are relative to its directory.
* **environment**: ``SIMPLELLMFUNC_<SECTION>[__<KEY>...]=value``, e.g.
  ``SIMPLELLMFUNC_LIMITS__MAX_STEPS=5``, ``SIMPLELLMFUNC_MODEL=openai:gpt-4o-mini``,
  ``SIMPLELLMFUNC_TOOLKIT__PYREPL=false``. Values are text (pydantic converts numbers);
  ``true`` / ``false`` / ``null`` and JSON-ish ``[...]`` / ``{...}`` are parsed. Relative
  paths are relative to the working directory.
* **command line** (or ``run_config`` keyword overrides): a section as a mapping
  (``memory={"store": "sqlite", "path": "m.db"}``), a shortcut (``max_steps``,
  ``tool_timeout``, ``trace_file``, ``timeline``, ``session``), ``tools={"sub": "cmd"}`` (agents
  as tools, added to ``toolkit.agents``), or ``set=["limits.max_steps=3", ...]``.

Mappings merge key by key; any other value replaces the lower layer's. ``model`` given as text
replaces only which model is used (``preset`` or the ``provider_file`` entry) and keeps the
lower layers' ``base_url``, ``params`` ...; a name without a known ``provider:`` prefix only
changes the model name (``--model deepseek-reasoner``).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ...exceptions import ConfigError
from ._file import KeyPath, LineMap
from ._schema import AgentConfig
from ._shapes import SPEC, is_dict, normalize, resolve_paths

__all__ = ["ENV_PREFIX", "Layer", "env_layer", "file_layer", "merge_layers", "override_layer"]

ENV_PREFIX = "SIMPLELLMFUNC_"
_SECTIONS = {name.lower(): name for name in AgentConfig.model_fields}
_SHORTCUTS: dict[str, KeyPath] = {
    "max_steps": ("limits", "max_steps"),
    "tool_timeout": ("limits", "tool_timeout"),
    "trace_file": ("trace", "file"),
    "timeline": ("trace", "timeline"),
    "session": ("memory", "session"),
}
_SELECTION = ("preset", "provider_file", "provider", "model")


@dataclass(slots=True)
class Layer:
    """One source of settings.

    Attributes:
        kind: ``"defaults"``, ``"file"``, ``"env"`` or ``"override"``.
        data: The settings, normalised (shorthands expanded, paths absolute).
        label: How errors name the source: the file path, or ``""``.
        lines: For a file: key path → line.
        origins: For the environment and overrides: key path → variable or option name.
    """

    kind: str
    data: dict[str, Any]
    label: str = ""
    lines: LineMap = field(default_factory=dict)
    origins: dict[KeyPath, str] = field(default_factory=dict)

    def where(self, key: KeyPath) -> str:
        """``file:line``, ``$VARIABLE`` or ``override name`` for the setting at ``key``."""
        for end in range(len(key), 0, -1):
            prefix = key[:end]
            if self.kind == "file" and prefix in self.lines:
                return f"{self.label}:{self.lines[prefix]}"
            if prefix in self.origins:
                return self.origins[prefix]
        return self.label or self.kind


def _known_preset(spec: str) -> bool:
    from ...providers import PRESETS

    return spec.partition(":")[0].strip().lower() in PRESETS and ":" in spec


# --- layers ---------------------------------------------------------------------------------


def file_layer(data: Mapping[str, object], path: Path, lines: LineMap) -> Layer:
    """The file's settings: shorthands expanded, paths relative to the file's directory, and
    each stdio MCP server started in that directory unless it says otherwise."""
    base = path.resolve().parent
    normalized = normalize(data)
    servers = (
        normalized.get("toolkit", {}).get("mcpServers") if is_dict(normalized, "toolkit") else None
    )
    if isinstance(servers, dict):
        for entry in servers.values():
            if isinstance(entry, dict) and "command" in entry:
                entry.setdefault("cwd", str(base))
    resolve_paths(normalized, base)
    return Layer("file", normalized, str(path), lines)


def _env_value(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "null":
        return None
    if text.strip()[:1] in ("[", "{"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    return text


def _set_path(data: dict[str, Any], key: KeyPath, value: object) -> None:
    node = data
    for part in key[:-1]:
        child = node.get(str(part))
        if isinstance(child, str) and node is data and part == "model":
            child = node["model"] = {SPEC: child}  # SIMPLELLMFUNC_MODEL with MODEL__...
        if not isinstance(child, dict):
            child = node[str(part)] = {}
        node = child
    node[str(key[-1])] = value


def env_layer(environ: Mapping[str, str] | None = None) -> Layer:
    """``SIMPLELLMFUNC_<SECTION>[__<KEY>...]`` variables; other names are ignored."""
    env = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    origins: dict[KeyPath, str] = {}
    for name in sorted(env):
        if not name.upper().startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].split("__")
        section = _SECTIONS.get(parts[0].lower())
        if section is None or not all(parts):
            continue
        key: KeyPath = (section, *(_env_key(p) for p in parts[1:]))
        _set_path(data, key, _env_value(env[name]))
        origins[key] = f"${name}"
    layer = Layer("env", normalize(data), "environment", origins=origins)
    resolve_paths(layer.data, Path.cwd())
    return layer


def _env_key(part: str) -> str:
    """Variable names are upper case; config keys are lower case (except ``mcpServers``)."""
    return "mcpServers" if part.lower() == "mcpservers" else part.lower()


def _parse_assignment(text: str) -> tuple[KeyPath, Any]:
    dotted, sep, value = text.partition("=")
    parts = tuple(p for p in re.split(r"\.", dotted.strip()) if p)
    if not sep or not parts:
        raise ConfigError(f"--set {text!r}: write KEY=VALUE, e.g. limits.max_steps=5")
    return parts, _env_value(value)


def override_layer(overrides: Mapping[str, Any]) -> Layer:
    """Command-line / keyword overrides (see the module docstring).

    Raises:
        ConfigError: For an unknown override name or a malformed ``set`` entry.
    """
    data: dict[str, Any] = {}
    origins: dict[KeyPath, str] = {}
    for name, value in overrides.items():
        if value is None:
            continue
        if name in _SHORTCUTS:
            _set_path(data, _SHORTCUTS[name], value)
            origins[_SHORTCUTS[name]] = f"override {name}"
        elif name in AgentConfig.model_fields:
            data[name] = copy.deepcopy(value)
            origins[(name,)] = f"override {name}"
        elif name == "set":
            for text in [value] if isinstance(value, str) else value:
                key, parsed = _parse_assignment(text)
                _set_path(data, key, parsed)
                origins[key] = f"--set {text}"
        elif name == "tools":
            _add_tools(data, origins, value)
        else:
            raise ConfigError(f"unknown override {name!r}")
    layer = Layer("override", normalize(data), "override", origins=origins)
    resolve_paths(layer.data, Path.cwd())
    return layer


def _add_tools(data: dict[str, Any], origins: dict[KeyPath, str], tools: Any) -> None:
    pairs = tools.items() if isinstance(tools, Mapping) else tools
    entries = [{"name": name, "command": command} for name, command in pairs]
    data.setdefault("+agents", []).extend(entries)
    if entries:
        origins[("toolkit", "agents")] = "--tool " + ", ".join(e["name"] for e in entries)


# --- merging --------------------------------------------------------------------------------


def _resolve_model(lower: object, upper: object) -> tuple[Any, Any]:
    """Apply a model given as text (``@spec``) to the lower layers' model section."""
    if not isinstance(upper, dict) or SPEC not in upper:
        return lower, upper
    value = upper[SPEC]
    rest = {k: v for k, v in upper.items() if k != SPEC}
    base = dict(lower) if isinstance(lower, dict) else {}
    if not isinstance(value, str):
        return base, {**rest, "preset": value}  # let validation say what is wrong
    if _known_preset(value) or not (base.get("preset") or base.get("provider_file")):
        for key in _SELECTION:
            base.pop(key, None)
        base["preset"] = value
    elif base.get("provider_file"):
        base["model"] = value
    else:
        base["preset"] = f"{str(base['preset']).partition(':')[0]}:{value}"
    return base, rest


def _merge(
    lower: object, upper: object, key: KeyPath, owners: dict[KeyPath, Layer], layer: Layer
) -> Any:
    if key == ("model",) and isinstance(upper, dict) and SPEC in upper:
        lower, upper = _resolve_model(lower, upper)
        for name in _SELECTION:
            owners[(*key, name)] = layer
    if isinstance(lower, dict) and isinstance(upper, dict):
        merged = dict(lower)
        for name, value in upper.items():
            merged[name] = _merge(lower.get(name), value, (*key, name), owners, layer)
        owners.setdefault(key, layer)
        return merged
    for owned in [k for k in owners if k[: len(key)] == key]:
        del owners[owned]
    owners[key] = layer
    return copy.deepcopy(upper)


def merge_layers(layers: Sequence[Layer]) -> tuple[dict[str, Any], dict[KeyPath, Layer]]:
    """Merge ``layers`` (lowest first); also return which layer set each key path.

    ``+agents`` entries of an override layer are appended to ``toolkit.agents`` (replacing a
    tool of the same name) instead of replacing the list.
    """
    merged: dict[str, Any] = {}
    owners: dict[KeyPath, Layer] = {}
    for layer in layers:
        data = dict(layer.data)
        extra = data.pop("+agents", [])
        merged = _merge(merged, data, (), owners, layer)
        if extra:
            toolkit = merged.setdefault("toolkit", {})
            if isinstance(toolkit, dict):
                names = {e["name"] for e in extra}
                agents = toolkit.get("agents") or []
                kept = [a for a in agents if not (isinstance(a, dict) and a.get("name") in names)]
                toolkit["agents"] = [*kept, *extra]
                owners[("toolkit", "agents")] = layer
    return merged, owners
