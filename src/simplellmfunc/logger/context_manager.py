"""SimpleLLMFunc's ``logger.context_manager`` module: the fields that
:func:`~simplellmfunc.logger.log_context` adds to every record logged by ``app_log`` / ``push_*``,
read and set one at a time."""

from __future__ import annotations

from typing import Any

from . import _CONTEXT, log_context

__all__ = [
    "get_current_context_attribute",
    "get_current_trace_id",
    "log_context",
    "set_current_context_attribute",
]


def get_current_context_attribute(key: str) -> Any:
    """The log-context field ``key`` (``None`` when not set)."""
    return (_CONTEXT.get() or {}).get(key)


def set_current_context_attribute(key: str, value: Any) -> None:
    """Set the log-context field ``key`` for the rest of the current context (inside a
    :func:`log_context` block, until the block ends)."""
    _CONTEXT.set({**(_CONTEXT.get() or {}), key: value})


def get_current_trace_id() -> str:
    """The log-context field ``trace_id`` (``""`` when not set)."""
    return str(get_current_context_attribute("trace_id") or "")
