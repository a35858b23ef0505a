"""SimpleLLMFunc's ``observability`` module: tracing runs to Langfuse (the ``[langfuse]`` extra).

Langfuse receives the OpenTelemetry spans this package emits (:mod:`simplellmfunc.runtime.otel`:
an ``invoke_agent`` span per run, ``chat`` spans per LLM call with model and token usage,
``execute_tool`` spans). :func:`get_langfuse_client` builds the ``langfuse.Langfuse`` client from
``LANGFUSE_PUBLIC_KEY``, ``LANGFUSE_SECRET_KEY`` and ``LANGFUSE_BASE_URL`` (or ``LANGFUSE_HOST``)
on first use, on a tracer provider of its own; :func:`langfuse_tracing` is the
:class:`~simplellmfunc.runtime.otel.GenAITracing` that sends spans there::

    tracing = langfuse_tracing()
    with tracing.agent_run("assistant"):
        async for text, history in assistant("hi"):
            ...
    flush_all_observations()

Nothing is configured or sent at import time, and without the keys nothing is sent at all
(``get_langfuse_config().enabled`` is false, the client is built with tracing disabled).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .exceptions import ConfigError

if TYPE_CHECKING:
    from .runtime.otel import GenAITracing

__all__ = [
    "LangfuseConfig",
    "flush_all_observations",
    "get_langfuse_client",
    "get_langfuse_config",
    "langfuse_tracing",
    "shutdown_langfuse",
]

_DEFAULT_BASE_URL = "https://cloud.langfuse.com"
_LOCK = threading.Lock()
_CLIENT: list[tuple[Any, Any, LangfuseConfig]] = []  # (client, tracer provider, config)


@dataclass(frozen=True, slots=True)
class LangfuseConfig:
    """Where traces go. ``enabled`` is true when both keys are set (and ``LANGFUSE_ENABLED`` is
    not ``false``). The secret key is never shown in the repr."""

    public_key: str = ""
    secret_key: str = ""
    base_url: str = _DEFAULT_BASE_URL
    enabled: bool = False

    def __repr__(self) -> str:
        shown = f"{self.public_key[:6]}…" if self.public_key else "''"
        where = f"base_url={self.base_url!r}, enabled={self.enabled}"
        return f"LangfuseConfig(public_key={shown}, {where})"


def get_langfuse_config() -> LangfuseConfig:
    """The Langfuse settings of the environment (read on each call)."""
    public = os.environ.get("LANGFUSE_PUBLIC_KEY", "")
    secret = os.environ.get("LANGFUSE_SECRET_KEY", "")
    base = os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST")
    switched_off = os.environ.get("LANGFUSE_ENABLED", "").lower() in ("0", "false", "no")
    enabled = bool(public and secret) and not switched_off
    return LangfuseConfig(public, secret, base or _DEFAULT_BASE_URL, enabled)


def _langfuse() -> Any:
    try:
        import langfuse
    except ImportError as exc:
        raise ConfigError(
            "Langfuse tracing needs the langfuse package: pip install 'simplellmfunc[langfuse]'"
        ) from exc
    return langfuse


def get_langfuse_client(config: LangfuseConfig | None = None) -> Any:
    """The process's ``langfuse.Langfuse`` client (built on first call, from ``config`` or the
    environment; a different ``config`` given later replaces it), exporting every span of its tracer
    provider.

    Raises:
        ConfigError: If the ``langfuse`` package is not installed.
    """
    if config is not None and _CLIENT and _CLIENT[0][2] != config:
        shutdown_langfuse()
    with _LOCK:
        if _CLIENT:
            return _CLIENT[0][0]
        settings = config or get_langfuse_config()
        langfuse = _langfuse()
        from opentelemetry.sdk.trace import TracerProvider

        provider = TracerProvider()
        client = langfuse.Langfuse(
            public_key=settings.public_key or None,
            secret_key=settings.secret_key or None,
            base_url=settings.base_url,
            tracing_enabled=settings.enabled,
            tracer_provider=provider,
            should_export_span=lambda _span: True,  # ours are GenAI spans of another scope
        )
        _CLIENT.append((client, provider, settings))
        return client


def langfuse_tracing(config: LangfuseConfig | None = None) -> GenAITracing:
    """A :class:`~simplellmfunc.runtime.otel.GenAITracing` whose spans go to Langfuse.

    Raises:
        ConfigError: If the ``langfuse`` package is not installed.
    """
    from .runtime.otel import GenAITracing

    get_langfuse_client(config)
    return GenAITracing(_CLIENT[0][1])


def flush_all_observations() -> None:
    """Send the spans not yet exported (a no-op when no Langfuse client was built)."""
    if _CLIENT:
        _CLIENT[0][0].flush()


def shutdown_langfuse() -> None:
    """Flush and stop the Langfuse client and its threads (a new one is built on next use)."""
    with _LOCK:
        built = _CLIENT[:]
        _CLIENT.clear()
    for client, provider, _config in built:
        client.shutdown()
        provider.shutdown()


def __getattr__(name: str) -> Any:
    # SimpleLLMFunc's module-level objects, built on first access instead of at import.
    if name == "langfuse_client":
        return get_langfuse_client()
    if name == "langfuse_config":
        return get_langfuse_config()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
