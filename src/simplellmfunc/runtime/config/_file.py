"""Reading an agent config file (YAML, TOML or JSON) with the line of every key.

Errors must name the key and the line, never show a traceback, so each reader also builds a
map from key paths (``("limits", "max_steps")``, ``("toolkit", "shell", 0, "name")``) to
1-based line numbers: YAML from the node marks of ``yaml.compose``; JSON through the same
composer (JSON is YAML's flow style), with a scan for quoted keys when that fails; TOML (whose
parser keeps no positions) by a scan of table headers and ``key =`` lines.
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import yaml

from ...exceptions import ConfigError

__all__ = [
    "ConfigSource",
    "KeyPath",
    "LineMap",
    "dotted",
    "parse_config_text",
    "read_config_file",
]

KeyPath: TypeAlias = tuple[str | int, ...]
LineMap: TypeAlias = dict[KeyPath, int]

_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """A parsed config file.

    Attributes:
        path: The file.
        data: Its settings.
        lines: Key path → line number (1-based).
    """

    path: Path
    data: dict[str, Any]
    lines: LineMap = field(default_factory=dict)

    def line_of(self, key: KeyPath) -> int | None:
        """The line of ``key``, or of its nearest ancestor the map knows."""
        for end in range(len(key), 0, -1):
            line = self.lines.get(key[:end])
            if line is not None:
                return line
        return None


def read_config_file(path: str | Path) -> ConfigSource:
    """Read and parse an agent config file; the format follows the suffix (YAML otherwise).

    Raises:
        ConfigError: For an unreadable file or a syntax error (with its line), or a file
            that does not hold a mapping.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read agent config {file}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{file}: not a UTF-8 text file") from None
    return parse_config_text(text, file)


def parse_config_text(text: str, path: Path) -> ConfigSource:
    """Parse ``text`` as the format of ``path``'s suffix.

    Raises:
        ConfigError: For a syntax error (with its line) or a file that is not a mapping.
    """
    suffix = path.suffix.lower()
    if suffix == ".toml":
        data, lines = _toml(text, path)
    elif suffix == ".json":
        data, lines = _json(text, path)
    else:
        data, lines = _yaml(text, path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: the file must hold a mapping of settings (key: value)")
    return ConfigSource(path, data, lines)


def _yaml(text: str, path: Path) -> tuple[Any, LineMap]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    lines: LineMap = {}
    if node is not None:
        _walk(node, (), lines, path)
    return data, lines


def _walk(node: yaml.Node, prefix: KeyPath, lines: LineMap, path: Path) -> None:
    """Record the line of every key and item under ``node``; refuse duplicate keys."""
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 1
            if key in seen and key != "<<":
                raise ConfigError(f"{path}:{line}: {_dotted((*prefix, key))}: duplicate key")
            seen.add(key)
            lines[(*prefix, key)] = line
            _walk(value_node, (*prefix, key), lines, path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            lines[(*prefix, index)] = item.start_mark.line + 1
            _walk(item, (*prefix, index), lines, path)


def _json(text: str, path: Path) -> tuple[Any, LineMap]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    lines: LineMap = {}
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        if node is not None:
            _walk(node, (), lines, path)
    except yaml.YAMLError:  # valid JSON that YAML 1.1 cannot read (tabs ...): scan for keys
        lines = _scan_json_keys(text, data)
    return data, lines


def _scan_json_keys(text: str, data: object) -> LineMap:
    """Lines of keys found by searching ``"key":`` after the parent's line (an approximation)."""
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    lines: LineMap = {}

    def line_at(offset: int) -> int:
        return sum(1 for start in starts if start <= offset)

    def visit(value: object, prefix: KeyPath, offset: int) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                found = re.compile(re.escape(json.dumps(str(key))) + r"\s*:").search(text, offset)
                at = found.start() if found else offset
                lines[(*prefix, str(key))] = line_at(at)
                visit(item, (*prefix, str(key)), at)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                visit(item, (*prefix, index), offset)

    visit(data, (), 0)
    return lines


def _toml(text: str, path: Path) -> tuple[Any, LineMap]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return data, _scan_toml(text)


def _toml_parts(raw: str) -> list[str]:
    return [part.strip().strip("\"'") for part in raw.split(".")]


def _scan_toml(text: str) -> LineMap:
    """Lines of table headers and ``key = value`` lines (not inside multi-line strings)."""
    lines: LineMap = {}
    table: KeyPath = ()
    arrays: dict[KeyPath, int] = {}
    in_string = False
    for number, line in enumerate(text.splitlines(), start=1):
        toggles = (line.count('"""') + line.count("'''")) % 2 == 1
        if in_string:  # inside a multi-line string: nothing here is a key
            in_string = not toggles
            continue
        in_string = toggles  # a key whose value is a multi-line string still counts
        header = _TOML_HEADER.match(line)
        if header:
            parts: KeyPath = tuple(_toml_parts(header.group(2)))
            if header.group(1) == "[[":
                index = arrays.get(parts, -1) + 1
                arrays[parts] = index
                lines.setdefault(parts, number)
                parts = (*parts, index)
            table = parts
            lines.setdefault(table, number)
            continue
        key = _TOML_KEY.match(line)
        if key and not line.lstrip().startswith("#"):
            lines.setdefault((*table, *_toml_parts(key.group(1))), number)
    return lines


def _dotted(key: KeyPath) -> str:
    out = ""
    for part in key:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def dotted(key: KeyPath) -> str:
    """``("toolkit", "shell", 0, "name")`` → ``toolkit.shell[0].name``."""
    return _dotted(key)
