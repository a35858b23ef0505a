"""How to reach an MCP server, and the common ``{"mcpServers": {...}}`` configuration file."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit, urlunsplit

import httpx2
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from ..exceptions import ConfigError

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "HttpSpec",
    "ServerSpec",
    "StdioSpec",
    "child_environment",
    "load_config",
    "safe_url",
    "secret_values",
    "stdio_spec",
]

#: Host variables a stdio server inherits; everything else (API keys, tokens) stays private
#: unless passed in ``env`` or named in ``inherit_env``.
_WINDOWS_ENV: tuple[str, ...] = ("APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH")
_WINDOWS_ENV += ("PATHEXT", "PROCESSOR_ARCHITECTURE", "SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP")
_WINDOWS_ENV += ("USERNAME", "USERPROFILE")
_POSIX_ENV: tuple[str, ...] = ("HOME", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "TMPDIR", "TZ")
_POSIX_ENV += ("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES")
DEFAULT_ENV_ALLOWLIST: tuple[str, ...] = _WINDOWS_ENV if sys.platform == "win32" else _POSIX_ENV


@dataclass(frozen=True, slots=True)
class StdioSpec:
    """A server started as a child process, spoken to over stdin / stdout."""

    command: str
    args: tuple[str, ...] = field(default=(), repr=False)
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    inherit_env: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """A short description without arguments or environment (they may hold secrets)."""
        return f"stdio:{Path(self.command).name}"


@dataclass(frozen=True, slots=True)
class HttpSpec:
    """A server reached over streamable HTTP, or over the legacy HTTP+SSE transport."""

    url: str = field(repr=False)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    auth: httpx2.Auth | None = field(default=None, repr=False)
    transport: Literal["streamable-http", "sse"] = "streamable-http"

    @property
    def label(self) -> str:
        """The URL without credentials, query or fragment."""
        return f"{self.transport}:{safe_url(self.url)}"


ServerSpec: TypeAlias = StdioSpec | HttpSpec


def safe_url(url: str) -> str:
    """``url`` without user info, query and fragment (they may carry tokens)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def child_environment(spec: StdioSpec) -> dict[str, str]:
    """The environment of a stdio server: the allowlist, ``inherit_env``, then ``spec.env``."""
    names = (*DEFAULT_ENV_ALLOWLIST, *spec.inherit_env)
    env = {name: os.environ[name] for name in names if name in os.environ}
    # Exported shell functions look like "() { ...": never hand them to a child.
    env = {name: value for name, value in env.items() if not value.startswith("()")}
    env.update(spec.env or {})
    return env


def secret_values(spec: StdioSpec) -> list[str]:
    """The values a stdio server was given that may be secrets, to keep out of errors.

    Everything passed in ``env`` or named in ``inherit_env``, except very short values (``1``,
    ``true``) and lists of absolute paths (``PYTHONPATH``), which would only garble the text.
    """
    given = dict(spec.env or {})
    given.update({name: os.environ[name] for name in spec.inherit_env if name in os.environ})
    return [value for value in given.values() if len(value) >= 6 and not _paths(value)]


def _paths(value: str) -> bool:
    return all(os.path.isabs(part) for part in value.split(os.pathsep))


# --- the configuration file ----------------------------------------------------------------


class _Entry(BaseModel):
    model_config = ConfigDict(extra="ignore")

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] | None = None
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = {}
    type: str | None = None
    transport: str | None = None
    disabled: bool = False


class _File(BaseModel):
    model_config = ConfigDict(extra="ignore")

    mcpServers: dict[str, _Entry]


_FILE = TypeAdapter(_File)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_SSE_NAMES = frozenset({"sse"})
_HTTP_NAMES = frozenset({"http", "streamable-http", "streamable_http", "streamablehttp"})


def load_config(source: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, ServerSpec]:
    """Read ``{"mcpServers": {name: {command, args, env} | {url, headers}}}``.

    ``source`` is a path to a JSON file or the parsed mapping. ``${VAR}`` and
    ``${VAR:-default}`` in commands, arguments, URLs, env and header values expand from the host
    environment: that is how a config names a secret without containing it. Entries with
    ``"disabled": true`` are skipped.

    Raises:
        ConfigError: For an unreadable file, invalid JSON, a wrong shape, an entry with neither
            ``command`` nor ``url``, or a ``${VAR}`` that is not set.
    """
    raw = _read(source)
    try:
        parsed = _FILE.validate_python(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid MCP configuration: {_problems(exc)}") from None
    specs: dict[str, ServerSpec] = {}
    for name, entry in parsed.mcpServers.items():
        if not entry.disabled:
            specs[name] = _spec(name, entry)
    return specs


def _read(source: str | os.PathLike[str] | Mapping[str, Any]) -> Any:
    if isinstance(source, Mapping):
        return source
    path = Path(source)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read MCP configuration {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(f"MCP configuration {path} is not valid JSON: {exc}") from None


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'root'}: {err['msg']}"
        for err in exc.errors(include_url=False)
    )


def _spec(name: str, entry: _Entry) -> ServerSpec:
    kind = (entry.type or entry.transport or "").lower()
    if entry.command is not None and kind in ("", "stdio"):
        return StdioSpec(
            command=_expand(entry.command, name),
            args=tuple(_expand(a, name) for a in entry.args),
            env={k: _expand(v, name) for k, v in entry.env.items()} if entry.env else None,
            cwd=_expand(entry.cwd, name) if entry.cwd else None,
        )
    if entry.url is not None and (kind == "" or kind in _HTTP_NAMES or kind in _SSE_NAMES):
        transport: Literal["streamable-http", "sse"] = (
            "sse" if kind in _SSE_NAMES else ("streamable-http")
        )
        headers = {k: _expand(v, name) for k, v in entry.headers.items()}
        return HttpSpec(url=_expand(entry.url, name), headers=headers, transport=transport)
    raise ConfigError(
        f"MCP server {name!r}: give either 'command' (stdio) or 'url' (http / sse); "
        f"got type {kind or 'unset'!r}"
    )


def _expand(value: str, server: str) -> str:
    def replace(match: re.Match[str]) -> str:
        var, default = match.group(1), match.group(2)
        found = os.environ.get(var, default)
        if found is None:
            raise ConfigError(f"MCP server {server!r}: environment variable {var} is not set")
        return found

    return _VAR.sub(replace, value)


def stdio_spec(
    command: str,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    inherit_env: Sequence[str] = (),
) -> StdioSpec:
    """Build a :class:`StdioSpec` from user arguments."""
    return StdioSpec(
        command=str(command),
        args=tuple(str(a) for a in args),
        env=dict(env) if env is not None else None,
        cwd=str(cwd) if cwd is not None else None,
        inherit_env=tuple(inherit_env),
    )
