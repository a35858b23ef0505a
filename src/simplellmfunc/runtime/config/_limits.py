"""``ServeLimits``: the one set of limits of a served agent, and their one set of defaults.

Code (``ServedAgent``, ``SessionStore``, ``web_chat_app``), config files (the ``serve:``
section) and the command line (``serve`` / ``web`` flags) all read their defaults from here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...exceptions import UserError

__all__ = ["ServeLimits"]


@dataclass(frozen=True, slots=True)
class ServeLimits:
    """How much one served agent takes on at once.

    Attributes:
        max_sessions: Sessions open at once; beyond it the least recently used idle session
            is closed (its history stays in the store); all busy: refused.
        idle_timeout: Seconds without a turn after which a session is closed (its kernel
            too; its history stays in the store); ``None``: never.
        max_turns: Turns running at once (every front counts); one more is refused.
        pool_size: Kernels started ahead of time for new sessions (with a kernel per session).
        max_sessions_per_principal: Sessions one principal (a token of the token file) may
            have open at once; a new one beyond it is refused. ``None``: no cap of its own
            (``max_sessions`` still holds).
        max_turns_per_principal: Turns one principal may run at once; one more is refused
            while other principals are still served. ``None``: no cap of its own.

    Raises:
        UserError: For a limit below 1, a negative pool or a non-positive idle timeout.
    """

    max_sessions: int = 100
    idle_timeout: float | None = 900.0
    max_turns: int = 16
    pool_size: int = 2
    max_sessions_per_principal: int | None = None
    max_turns_per_principal: int | None = None

    def __post_init__(self) -> None:
        if self.max_sessions < 1:
            raise UserError(f"max_sessions must be at least 1, got {self.max_sessions}")
        if self.max_turns < 1:
            raise UserError(f"max_turns must be at least 1, got {self.max_turns}")
        if self.pool_size < 0:
            raise UserError(f"pool_size must not be negative, got {self.pool_size}")
        if self.idle_timeout is not None and self.idle_timeout <= 0:
            raise UserError(f"idle_timeout must be positive, got {self.idle_timeout}")
        for name in ("max_sessions_per_principal", "max_turns_per_principal"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"{name} must be at least 1 (or None: no cap), got {value}")


#: The defaults, as one object.
DEFAULT_LIMITS = ServeLimits()
