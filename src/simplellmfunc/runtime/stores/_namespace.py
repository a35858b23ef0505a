"""Namespaces: every stored item belongs to one agent and one session.

A store keeps namespaces apart itself (separate columns in SQLite, separate key prefixes in
Redis, separate maps in memory); a caller cannot name an item of another namespace, because a
key is only ever looked up inside the namespace it is given with. Agent and session names are
restricted to ``[A-Za-z0-9_.-]`` so that a name can never contain a separator or a glob
character of the Redis key layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...exceptions import ConfigError, UserError

__all__ = ["DEFAULT_SESSION", "Namespace", "check_key"]

DEFAULT_SESSION = "default"
_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_MAX_KEY = 512


def _check_name(value: object, what: str) -> None:
    if not isinstance(value, str) or _NAME.fullmatch(value) is None:
        raise ConfigError(
            f"{what} name must be 1-128 characters of letters, digits, '_', '.' or '-', "
            f"got {value!r}"
        )


@dataclass(frozen=True, slots=True)
class Namespace:
    """The agent and session an item belongs to.

    Raises:
        ConfigError: If a name is empty, too long or has characters outside ``[A-Za-z0-9_.-]``.
    """

    agent: str
    session: str = DEFAULT_SESSION

    def __post_init__(self) -> None:
        _check_name(self.agent, "agent")
        _check_name(self.session, "session")

    def __str__(self) -> str:
        return f"{self.agent}/{self.session}"


def check_key(key: object) -> str:
    """Return ``key`` if it is a usable item key (a non-empty string of at most 512 characters).

    Raises:
        UserError: Otherwise.
    """
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY:
        raise UserError(f"a store key must be a non-empty string of at most {_MAX_KEY} characters")
    return key
