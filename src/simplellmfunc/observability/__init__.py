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

import contextvars
import os
import re
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._compat import keep_package_attributes
from ..exceptions import ArgumentValueError, ConfigError

if TYPE_CHECKING:
    from ..runtime.otel import GenAITracing

__all__ = [
    "LangfuseConfig",
    "flush_all_observations",
    "get_langfuse_client",
    "get_langfuse_config",
    "get_langfuse_trace_context",
    "langfuse_tracing",
    "reset_langfuse_trace_context",
    "set_langfuse_trace_context",
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


def _trace_api() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigError(
            "Langfuse tracing needs OpenTelemetry: pip install 'simplellmfunc[langfuse]'"
        ) from exc
    return trace


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
    from ..runtime.otel import GenAITracing

    class _LangfuseTracing(GenAITracing):
        """Its ``agent_run`` joins the trace set by :func:`set_langfuse_trace_context` when no
        span is current and no carrier is given."""

        @contextmanager
        def agent_run(
            self,
            agent_name: str,
            carrier: Mapping[str, str] | None = None,
            *,
            conversation_id: str | None = None,
            attributes: Mapping[str, Any] | None = None,
        ) -> Iterator[None]:
            if carrier is None:
                carrier = _trace_context_carrier()
            with super().agent_run(
                agent_name, carrier, conversation_id=conversation_id, attributes=attributes
            ):
                yield

    get_langfuse_client(config)
    return _LangfuseTracing(_CLIENT[0][1])


_HEX = re.compile(r"[0-9a-f]+")
_TRACE_CONTEXT: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "simplellmfunc_langfuse_trace_context", default=None
)


def _hex_id(value: object, width: int, what: str) -> str:
    text = str(value).lower()
    if len(text) != width or not _HEX.fullmatch(text) or not text.strip("0"):
        raise ArgumentValueError(f"{what} must be {width} hex digits, not {value!r}")
    return text


def set_langfuse_trace_context(
    trace_context: Mapping[str, str],
) -> contextvars.Token[dict[str, str] | None]:
    """Make runs traced by :func:`langfuse_tracing` in this context join an existing Langfuse
    trace: ``{"trace_id": <32 hex>, "parent_span_id": <16 hex, optional>}`` (Langfuse's
    ``TraceContext``). Give the token to :func:`reset_langfuse_trace_context`.

    Raises:
        ArgumentValueError: If an id is not of that form.
    """
    context = {"trace_id": _hex_id(trace_context.get("trace_id", ""), 32, "trace_id")}
    parent = trace_context.get("parent_span_id")
    if parent:
        context["parent_span_id"] = _hex_id(parent, 16, "parent_span_id")
    return _TRACE_CONTEXT.set(context)


def reset_langfuse_trace_context(token: contextvars.Token[dict[str, str] | None]) -> None:
    """Undo :func:`set_langfuse_trace_context` (a token of another context, or one already
    used, is ignored, as in SimpleLLMFunc)."""
    try:
        _TRACE_CONTEXT.reset(token)
    except (ValueError, RuntimeError):
        return


def get_langfuse_trace_context() -> dict[str, str] | None:
    """The trace runs join: the current OpenTelemetry span's (``trace_id``, and its span as
    ``parent_span_id``), else the one set by :func:`set_langfuse_trace_context`, else ``None``."""
    span = _trace_api().get_current_span().get_span_context()
    if span.is_valid:
        return {"trace_id": f"{span.trace_id:032x}", "parent_span_id": f"{span.span_id:016x}"}
    current = _TRACE_CONTEXT.get()
    return dict(current) if current else None


def _trace_context_carrier() -> dict[str, str] | None:
    current = _TRACE_CONTEXT.get()
    if current is None or _trace_api().get_current_span().get_span_context().is_valid:
        return None
    parent = current.get("parent_span_id") or secrets.token_hex(8)
    return {"traceparent": f"00-{current['trace_id']}-{parent}-01"}


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


# ``observability.langfuse_client`` (SimpleLLMFunc's module path) leaves ``langfuse_client``
# the client.
keep_package_attributes(__name__, "langfuse_client")
