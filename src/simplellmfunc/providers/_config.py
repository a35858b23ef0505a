"""Provider settings from ``provider.json``, ``.env`` and the environment."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from ..exceptions import ConfigError
from ._base import Capabilities
from ._retry import RetryPolicy

if TYPE_CHECKING:
    from ._base import LLMInterface

__all__ = ["env_settings", "interface_from_env", "load_provider_json"]

# Any interface class whose constructor takes (keys, model_name, base_url, *, max_retries=...,
# ...) as OpenAICompatible's does.
_I = TypeVar("_I", bound="LLMInterface")


class _ModelEntry(BaseModel):
    """One model entry of ``provider.json``."""

    model_config = ConfigDict(extra="allow")

    model_name: str = Field(min_length=1)
    api_keys: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    base_url: str = Field(min_length=1)
    max_retries: int = Field(default=2, ge=0)
    retry_delay: float | None = Field(default=None, ge=0)  # 0: retry at once
    rate_limit_capacity: float | None = Field(default=None, gt=0)
    rate_limit_refill_rate: float = Field(default=1.0, gt=0)
    timeout: float = Field(default=600.0, gt=0)
    context_window: int | None = None


_FILE = TypeAdapter(dict[str, list[_ModelEntry]])


def load_provider_json(cls: Callable[..., _I], path: str | Path) -> dict[str, dict[str, _I]]:
    """Parse ``provider.json`` into ``{provider: {model_name: interface}}``.

    Raises:
        ConfigError: For a missing file, invalid JSON (with line and column) or a bad entry
            (with its location, e.g. ``openai[0].api_keys``).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read provider file {file}: {exc.strerror}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    try:
        parsed = _FILE.validate_python(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{_loc(err['loc'])}: {err['msg']}" for err in exc.errors(include_url=False)
        )
        raise ConfigError(f"{file}: {problems}") from None
    result: dict[str, dict[str, _I]] = {}
    for provider, entries in parsed.items():
        models = result.setdefault(provider, {})
        for n, entry in enumerate(entries):
            if entry.model_name in models:
                raise ConfigError(
                    f"{file}: {provider}[{n}].model_name: duplicate model {entry.model_name!r}"
                )
            models[entry.model_name] = _build(cls, provider, entry)
    return result


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _build(cls: Callable[..., _I], provider: str, entry: _ModelEntry) -> _I:
    extra = dict(entry.model_extra or {})
    retry = None
    if entry.retry_delay is not None:  # the first backoff delay, in seconds
        retry = RetryPolicy(max_retries=entry.max_retries, initial_delay=entry.retry_delay)
    return cls(
        entry.api_keys,
        entry.model_name,
        entry.base_url,
        max_retries=entry.max_retries,
        retry_policy=retry,
        timeout=entry.timeout,
        rate_limit_capacity=entry.rate_limit_capacity,
        rate_limit_refill_rate=entry.rate_limit_refill_rate,
        context_window=entry.context_window,
        provider_name=provider,
        **extra,
    )


def env_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings from ``./.env`` overlaid with the process environment (which wins)."""
    if environ is not None:
        return dict(environ)
    from dotenv import dotenv_values

    values = {k: v for k, v in dotenv_values(Path.cwd() / ".env").items() if v is not None}
    values.update(os.environ)
    return values


def interface_from_env(
    cls: Callable[..., _I],
    environ: Mapping[str, str] | None = None,
    prefix: str = "OPENAI",
    default_base_url: str = "https://api.openai.com/v1",
) -> _I:
    """Build an interface from ``<prefix>_API_KEY`` (comma-separated for several keys),
    ``<prefix>_BASE_URL``, ``<prefix>_MODEL`` and ``<prefix>_CAPABILITIES``.

    The key may be left out for a server on this machine (a loopback base URL: llama.cpp,
    Ollama). ``<prefix>_CAPABILITIES`` declares what the server supports, as comma-separated
    ``name=true|false`` pairs of :class:`~simplellmfunc.providers.Capabilities` fields, e.g.
    ``native_tools=false,json_schema=true`` for llama.cpp's ``llama-server`` with a model whose
    template has no tools. ``<prefix>_MAX_TOKENS`` bounds every reply (a positive integer).

    Raises:
        ConfigError: If the model is missing, the key is missing for a remote server, or the
            capabilities or the token bound do not parse.
    """
    env = env_settings(environ)
    model = env.get(f"{prefix}_MODEL", "").strip()
    keys = [k.strip() for k in env.get(f"{prefix}_API_KEY", "").split(",") if k.strip()]
    base_url = env.get(f"{prefix}_BASE_URL", "").strip() or default_base_url
    if not model or not (keys or _is_loopback(base_url)):
        raise ConfigError(
            f"set {prefix}_MODEL and {prefix}_API_KEY (in the environment or .env); the key may "
            "be left out for a server on this machine"
        )
    capabilities = _capabilities(env.get(f"{prefix}_CAPABILITIES", ""), f"{prefix}_CAPABILITIES")
    extra: dict[str, Any] = {"capabilities": capabilities} if capabilities is not None else {}
    max_tokens = env.get(f"{prefix}_MAX_TOKENS", "").strip()
    if max_tokens:
        if not max_tokens.isdigit() or int(max_tokens) < 1:
            raise ConfigError(f"{prefix}_MAX_TOKENS must be a positive integer, got {max_tokens!r}")
        extra["max_tokens"] = int(max_tokens)
    return cls(keys or None, model, base_url, **extra)


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def _capabilities(text: str, name: str) -> Capabilities | None:
    """``Capabilities`` from ``"field=true,field=false"`` (``None`` for an empty text).

    Raises:
        ConfigError: For an unknown field or a value that is not true/false.
    """
    if not text.strip():
        return None
    known = {f.name for f in fields(Capabilities)}
    values: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        key, value = key.strip(), value.strip().lower()
        if key not in known:
            raise ConfigError(
                f"{name}: unknown capability {key!r}; known: {', '.join(sorted(known))}"
            )
        if value not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{name}: {key} must be true or false, got {value!r}")
        values[key] = value in ("true", "1", "yes")
    return Capabilities(**values)
