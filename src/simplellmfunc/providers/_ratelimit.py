"""TokenBucket: client-side rate limiting per interface."""

from __future__ import annotations

import time

import anyio

__all__ = ["TokenBucket"]


class TokenBucket:
    """A token bucket: up to ``capacity`` requests at once, refilled at ``refill_rate`` per second.

    Waiters sleep exactly until their token is due (no polling) and are served first come, first
    served; waiting is cancellable.

    Raises:
        ValueError: For a non-positive capacity or refill rate.
    """

    def __init__(self, capacity: float = 10, refill_rate: float = 1.0) -> None:
        if capacity <= 0 or refill_rate <= 0:
            raise ValueError("capacity and refill_rate must be positive")
        self.capacity = float(capacity)
        self.refill_rate = float(refill_rate)
        self._tokens = float(capacity)
        self._stamp = time.monotonic()
        self._lock: anyio.Lock | None = None

    def _refill(self) -> None:
        now = time.monotonic()
        self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.refill_rate)
        self._stamp = now

    @property
    def available(self) -> float:
        """Tokens available right now."""
        self._refill()
        return self._tokens

    def try_acquire(self, tokens: float = 1.0) -> bool:
        """Take ``tokens`` if available now, without waiting."""
        self._refill()
        if self._tokens >= tokens:
            self._tokens -= tokens
            return True
        return False

    async def acquire(self, tokens: float = 1.0) -> None:
        """Wait until ``tokens`` are available and take them.

        Raises:
            ValueError: If ``tokens`` exceeds the capacity (it could never be served).
        """
        if tokens > self.capacity:
            raise ValueError(f"cannot acquire {tokens} tokens from a bucket of {self.capacity}")
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:  # FIFO: the head waiter sleeps, the others queue behind it
            while not self.try_acquire(tokens):  # noqa: ASYNC110 - sleeps exactly until due
                await anyio.sleep((tokens - self._tokens) / self.refill_rate)

    def __repr__(self) -> str:
        return f"TokenBucket(capacity={self.capacity:g}, refill_rate={self.refill_rate:g})"
