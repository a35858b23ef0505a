"""SimpleLLMFunc's ``observability.langfuse_client`` module, over
:mod:`simplellmfunc.observability`.

``langfuse_client`` is the process's ``langfuse.Langfuse`` client, built on first access (not at
import, as in SimpleLLMFunc); ``langfuse_propagate_attributes`` is
``langfuse.propagate_attributes``; ``otel_trace_api`` is ``opentelemetry.trace``.
"""

from __future__ import annotations

from typing import Any

from . import (
    flush_all_observations,
    get_langfuse_client,
    get_langfuse_trace_context,
    reset_langfuse_trace_context,
    set_langfuse_trace_context,
)

__all__ = [
    "flush_all_observations",
    "get_langfuse_client",
    "get_langfuse_trace_context",
    "reset_langfuse_trace_context",
    "set_langfuse_trace_context",
]


def __getattr__(name: str) -> Any:
    if name == "langfuse_client":
        return get_langfuse_client()
    if name == "otel_trace_api":
        from . import _trace_api

        return _trace_api()
    if name == "langfuse_propagate_attributes":
        from . import _langfuse

        return _langfuse().propagate_attributes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
