"""Retry policy, equivalent to the official OpenAI / Anthropic SDKs."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = ["RETRYABLE_STATUS", "RetryPolicy"]

RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """When and how long to wait before retrying a failed request.

    Retries 408, 409, 429, every 5xx (incl. Anthropic's 529) and connection errors;
    ``x-should-retry`` overrides the status. The delay honours ``retry-after-ms``, then
    ``retry-after`` (seconds or an HTTP date) when it is between 0 and ``max_retry_after``;
    otherwise exponential backoff
    ``initial_delay * 2**n`` capped at ``max_delay``, with up to 25% jitter taken off.

    Args:
        max_retries: Retries after the first attempt (0 disables retrying).
        initial_delay: First backoff delay in seconds.
        max_delay: Cap of the exponential backoff.
        max_retry_after: Server-requested waits longer than this fall back to backoff.
    """

    max_retries: int = 2
    initial_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def should_retry(self, status: int | None, headers: Mapping[str, str]) -> bool:
        """Whether a response with ``status`` (``None``: connection error) may be retried."""
        verdict = headers.get("x-should-retry", "").lower()
        if verdict == "true":
            return True
        if verdict == "false":
            return False
        return status is None or status in RETRYABLE_STATUS or status >= 500

    def delay(self, retry_index: int, headers: Mapping[str, str]) -> float:
        """Seconds to wait before retry number ``retry_index`` (0-based)."""
        requested = retry_after_seconds(headers)
        if requested is not None and 0 <= requested <= self.max_retry_after:
            return requested
        backoff = min(self.initial_delay * float(2**retry_index), self.max_delay)
        return backoff * (1 - 0.25 * random.random())


def _number(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None  # "nan" and "inf" parse, but mean nothing


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """Parse ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date).

    Returns:
        Seconds from now (negative for a date in the past), or ``None`` when neither header is
        present or parseable.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms and (ms := _number(raw_ms)) is not None:
        return ms / 1000
    raw = headers.get("retry-after")
    if not raw:
        return None
    if (seconds := _number(raw)) is not None:
        return seconds
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # HTTP dates are GMT; a zone-less one must not read as local time
        when = when.replace(tzinfo=UTC)
    return when.timestamp() - time.time()
