"""SimpleLLMFunc's ``logger`` package: its ``app_log`` / ``push_*`` functions write to the
standard :mod:`logging` logger ``simplellmfunc.app`` (configure it as any other logger; the
library never configures logging itself). ``log_context(**fields)`` adds fields to every
record logged inside it (the innermost context's, as in SimpleLLMFunc), under the record's
``simplellmfunc`` attribute."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from .._compat import compat_getattr, keep_package_attributes
from .._lazy import publish

__all__ = [
    "app_log",
    "log_context",
    "push_critical",
    "push_debug",
    "push_error",
    "push_info",
    "push_warning",
]

_logger = logging.getLogger("simplellmfunc.app")


_CONTEXT: ContextVar[dict[str, Any] | None] = ContextVar("simplellmfunc_log_context", default=None)


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (``trace_id=...``, ...) to every record logged inside the block; a nested
    context replaces the outer one's fields until it ends."""
    token = _CONTEXT.set(dict(fields))
    try:
        yield
    finally:
        _CONTEXT.reset(token)


def _log(level: int, message: str, **extra: Any) -> None:
    exc_info = bool(extra.pop("exc_info", False))
    fields = {**(_CONTEXT.get() or {}), **{k: v for k, v in extra.items() if v not in ("", None)}}
    _logger.log(
        level,
        message,
        extra={"simplellmfunc": fields} if fields else None,
        exc_info=exc_info,
        stacklevel=3,
    )


def app_log(message: str, **extra: Any) -> None:
    """Log an application message (level INFO)."""
    _log(logging.INFO, message, **extra)


def push_debug(message: str, **extra: Any) -> None:
    """Log at DEBUG."""
    _log(logging.DEBUG, message, **extra)


def push_info(message: str, **extra: Any) -> None:
    """Log at INFO."""
    _log(logging.INFO, message, **extra)


def push_warning(message: str, **extra: Any) -> None:
    """Log at WARNING."""
    _log(logging.WARNING, message, **extra)


def push_error(message: str, **extra: Any) -> None:
    """Log at ERROR."""
    _log(logging.ERROR, message, **extra)


def push_critical(message: str, **extra: Any) -> None:
    """Log at CRITICAL."""
    _log(logging.CRITICAL, message, **extra)


__getattr__ = compat_getattr(
    __name__,
    None,
    {
        "setup_logger": "configure the standard logging module (logging.basicConfig ...)",
        "logger_config": "configure the standard logging module",
    },
)

publish(__name__, __all__)
# ``logger.app_log`` (SimpleLLMFunc's module path) leaves ``app_log`` the function.
keep_package_attributes(__name__, "app_log")
