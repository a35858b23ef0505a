"""SimpleLLMFunc's ``logger`` package: its ``app_log`` / ``push_*`` functions write to the
standard :mod:`logging` logger ``simplellmfunc.app`` (configure it as any other logger; the
library never configures logging itself)."""

from __future__ import annotations

import logging
from typing import Any

from .._compat import compat_getattr
from .._lazy import publish

__all__ = [
    "app_log",
    "push_critical",
    "push_debug",
    "push_error",
    "push_info",
    "push_warning",
]

_logger = logging.getLogger("simplellmfunc.app")


def _log(level: int, message: str, **extra: Any) -> None:
    _logger.log(level, message, extra={"simplellmfunc": extra} if extra else None, stacklevel=3)


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
        "log_context": "use the standard logging module (a logging.LoggerAdapter or filter)",
        "setup_logger": "configure the standard logging module (logging.basicConfig ...)",
        "logger_config": "configure the standard logging module",
    },
)

publish(__name__, __all__)
