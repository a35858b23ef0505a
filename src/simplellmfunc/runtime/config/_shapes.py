"""Config shapes: shorthands expanded and relative paths made absolute, per layer.

Every layer (file, environment, command line) goes through :func:`normalize` before the layers
are merged, so that a shorthand in one layer merges with the full form in another:
``model: "provider:model"`` (kept as ``{"@spec": ...}`` until merged, see :mod:`._precedence`),
``pyrepl: true``, ``files: DIR``, ``memory: KIND``, chain steps as plain strings.
:func:`resolve_paths` makes each path setting absolute against the layer's base directory.
:func:`use_this_python` makes a bare ``python`` command mean the interpreter running the agent.
"""

from __future__ import annotations

import copy
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._file import KeyPath

__all__ = ["PYTHON_NAMES", "SPEC", "is_dict", "normalize", "resolve_paths", "use_this_python"]

#: Commands that mean "Python": a config saying ``command: python`` wants the interpreter that
#: runs the agent (the project's virtualenv, with its packages), not the first ``python`` on
#: PATH (often a system Python without them, or none at all).
PYTHON_NAMES = frozenset({"python", "python3"})
SPEC = "@spec"  # a model given as text, resolved against the lower layers when merging
# Keys holding paths; "*" is any key or index.
_PATHS: tuple[KeyPath, ...] = (
    ("model", "provider_file"),
    ("memory", "path"),
    ("trace", "file"),
    ("checkpoints", "dir"),
    ("durable", "path"),
    ("toolkit", "files", "workspace"),
    ("toolkit", "pyrepl", "working_directory"),
    ("toolkit", "shell", "*", "cwd"),
    ("toolkit", "agents", "*", "cwd"),
    ("toolkit", "mcpServers", "*", "cwd"),
    ("knowledge", "path"),
    ("knowledge", "sources", "*"),
    ("sandbox", "read_only", "*"),
    ("sandbox", "writable", "*"),
    ("agents", "*"),
    ("handoffs", "*"),
)


def normalize(data: Mapping[str, Any]) -> dict[str, Any]:
    """Expand shorthands: tool switches, ``files: DIR``, chain steps as text, ``memory: KIND``,
    ``sandbox: true|false``."""
    out = copy.deepcopy(dict(data))
    if isinstance(out.get("model"), str):
        out["model"] = {SPEC: out["model"]}
    toolkit = out.get("toolkit")
    if isinstance(toolkit, dict):
        for key in ("pyrepl", "files"):
            value = toolkit.get(key, None)
            if value is True:
                toolkit[key] = {}
            elif value is False:
                toolkit[key] = None
        if isinstance(toolkit.get("files"), str):
            toolkit["files"] = {"workspace": toolkit["files"]}
    if isinstance(out.get("sandbox"), bool):
        out["sandbox"] = {"enabled": out["sandbox"]}
    if isinstance(out.get("chain"), list):
        out["chain"] = [{"prompt": s} if isinstance(s, str) else s for s in out["chain"]]
    if isinstance(out.get("memory"), str):
        out["memory"] = {"store": out["memory"]}
    return out


def resolve_paths(data: dict[str, Any], base: Path) -> None:
    for pattern in _PATHS:
        _resolve_at(data, pattern, base)
    model = data.get("model")
    if isinstance(model, dict):
        for fallback in model.get("fallback") or []:
            if isinstance(fallback, dict):
                _resolve_at(fallback, ("provider_file",), base)
    servers = (data.get("toolkit") or {}).get("mcpServers") if is_dict(data, "toolkit") else None
    if isinstance(servers, str):
        data["toolkit"]["mcpServers"] = _absolute(servers, base)


def is_dict(data: Mapping[str, object], key: str) -> bool:
    return isinstance(data.get(key), dict)


def _absolute(value: str, base: Path) -> str:
    if value == ":memory:":
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else base / path)


def _resolve_at(node: object, pattern: KeyPath, base: Path) -> None:
    if not pattern:
        return
    head, rest = pattern[0], pattern[1:]
    if head == "*" and not rest and isinstance(node, list):  # a list of paths
        node[:] = [_absolute(v, base) if isinstance(v, str) else v for v in node]
        return
    if head == "*":
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
        )
        for child in children:
            _resolve_at(child, rest, base)
        return
    if not isinstance(node, dict) or head not in node:
        return
    if not rest:
        if isinstance(node[head], str):
            node[head] = _absolute(node[head], base)
        return
    _resolve_at(node[head], rest, base)


def use_this_python(data: dict[str, Any]) -> None:
    """Replace a bare ``python`` / ``python3`` with :data:`sys.executable`, in place: the
    ``command`` of stdio MCP servers, and the first word of shell and agent tool commands.
    Paths (``/usr/bin/python3``) and other names (``python3.12``) are kept as given."""
    if not sys.executable or not is_dict(data, "toolkit"):
        return
    toolkit = data["toolkit"]
    servers = toolkit.get("mcpServers")
    if isinstance(servers, dict):
        for entry in servers.values():
            if isinstance(entry, dict) and entry.get("command") in PYTHON_NAMES:
                entry["command"] = sys.executable
    for key in ("shell", "agents"):
        for entry in toolkit.get(key) or []:
            if isinstance(entry, dict) and isinstance(entry.get("command"), str):
                entry["command"] = _this_python_first(entry["command"])


def _this_python_first(command: str) -> str:
    stripped = command.lstrip()
    first, sep, rest = stripped.partition(" ")
    if first not in PYTHON_NAMES:
        return command
    return shlex.quote(sys.executable) + sep + rest
