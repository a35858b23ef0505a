"""APIKeyPool: spread calls over several keys, cool down rate-limited ones, drop rejected ones."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from ..exceptions import ConfigError, NoUsableKeyError
from ._redact import fingerprint

__all__ = ["APIKeyPool"]


@dataclass(slots=True)
class _KeyState:
    key: str
    in_flight: int = 0
    cooldown_until: float = 0.0
    disabled_reason: str | None = None
    last_used: int = 0


class APIKeyPool:
    """A pool of API keys for one provider.

    :meth:`acquire` picks the healthy key with the fewest calls in flight (among equals, the one
    used least recently, so sequential calls rotate); a 429 cools a key down until its
    ``Retry-After`` passes (:meth:`cool_down`); a 401/403 disables it with a reason
    (:meth:`disable`). Every pool has its own state: two pools never share it.

    Args:
        keys: One key or several (duplicates are dropped).
        provider_id: A label for errors and logs (never the key).
        api_keys: SimpleLLMFunc's name for ``keys`` (give one of the two).

    Raises:
        ConfigError: If no key is given, or both ``keys`` and ``api_keys``.
    """

    def __init__(
        self,
        keys: str | Sequence[str] | None = None,
        provider_id: str = "",
        *,
        api_keys: str | Sequence[str] | None = None,
    ) -> None:
        if api_keys is not None:  # SimpleLLMFunc's name of the same argument
            if keys is not None:
                raise ConfigError("APIKeyPool takes keys or api_keys, not both")
            keys = api_keys
        if keys is None:
            raise ConfigError("APIKeyPool needs at least one non-empty key")
        unique = list(dict.fromkeys([keys] if isinstance(keys, str) else keys))
        if not unique or not all(isinstance(k, str) and k for k in unique):
            raise ConfigError("APIKeyPool needs at least one non-empty key")
        self.provider_id = provider_id
        self._states = [_KeyState(k) for k in unique]
        self._uses = 0

    @property
    def keys(self) -> tuple[str, ...]:
        """Every key of the pool (handle with care: never log them)."""
        return tuple(s.key for s in self._states)

    def status(self) -> list[dict[str, object]]:
        """Per-key status with fingerprints instead of keys."""
        now = time.monotonic()
        return [
            {
                "key": fingerprint(s.key),
                "in_flight": s.in_flight,
                "cooling_for_s": max(0.0, s.cooldown_until - now),
                "disabled": s.disabled_reason,
            }
            for s in self._states
        ]

    def _pick(self) -> _KeyState | float:
        """The least-loaded usable key, or the seconds until the first cooldown ends.

        One pass, no allocation: this runs on every call.
        """
        now = time.monotonic()
        best: _KeyState | None = None
        first_back = math.inf
        for state in self._states:
            if state.disabled_reason is not None:
                continue
            if state.cooldown_until > now:
                first_back = min(first_back, state.cooldown_until)
            elif best is None or (state.in_flight, state.last_used) < (
                best.in_flight,
                best.last_used,
            ):
                best = state
        if best is not None:
            return best
        if first_back == math.inf:
            reasons = "; ".join(f"{fingerprint(s.key)}: {s.disabled_reason}" for s in self._states)
            raise NoUsableKeyError(
                f"every API key is disabled ({reasons})", provider=self.provider_id
            )
        return first_back - now

    def try_acquire(self) -> str | None:
        """The key to use now, or ``None`` when every live key cools down (never waits).

        Raises:
            NoUsableKeyError: If every key is disabled.
        """
        picked = self._pick()
        if not isinstance(picked, _KeyState):
            return None
        picked.in_flight += 1
        self._uses += 1
        picked.last_used = self._uses
        return picked.key

    async def acquire(self) -> str:
        """Return the key to use now, waiting while every live key cools down.

        The wait is one sleep until the first cooldown ends (cancellable), not a poll.

        Raises:
            NoUsableKeyError: If every key is disabled.
        """
        while (key := self.try_acquire()) is None:
            wait = self._pick()
            if isinstance(wait, float):
                await anyio.sleep(wait)
        return key

    def has_live_key(self) -> bool:
        """Whether some key is not disabled (it may be cooling down)."""
        return any(s.disabled_reason is None for s in self._states)

    def has_ready_key(self) -> bool:
        """Whether some key could be used right now (not disabled, not cooling down)."""
        now = time.monotonic()
        return any(s.disabled_reason is None and s.cooldown_until <= now for s in self._states)

    def release(self, key: str) -> None:
        """Mark one call with ``key`` as finished."""
        state = self._state(key)
        state.in_flight = max(0, state.in_flight - 1)

    def cool_down(self, key: str, seconds: float) -> None:
        """Keep ``key`` unused for ``seconds`` (after a 429)."""
        state = self._state(key)
        state.cooldown_until = max(state.cooldown_until, time.monotonic() + max(seconds, 0.0))

    def disable(self, key: str, reason: str) -> None:
        """Stop using ``key`` (after a 401 / 403)."""
        self._state(key).disabled_reason = reason

    def _state(self, key: str) -> _KeyState:
        for state in self._states:
            if state.key == key:
                return state
        raise KeyError(fingerprint(key))

    def __len__(self) -> int:
        return len(self._states)

    def __repr__(self) -> str:
        keys = ", ".join(fingerprint(s.key) for s in self._states)
        return f"APIKeyPool(provider_id={self.provider_id!r}, keys=[{keys}])"
