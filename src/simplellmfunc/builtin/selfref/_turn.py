"""The ``@llm_chat`` turn whose tool call is running: what SelfReference primitives act on.

The run hook sets the turn in a context variable when the turn starts, in the run's task; tool
calls, and through the PyRepl bridge the primitives they call, run in tasks started from there
and so see it. Concurrent turns (forks running beside their parent) each see their own, which
"the most recently started turn" could not tell apart.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ...exceptions import UserError
from ._bank import MemoryBank
from ._forks import ForkManager

__all__ = ["ACTIVE_TURN", "Turn", "active_key", "active_turn", "current_turn"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One running turn bound to ``key`` of ``bank``.

    Attributes:
        bank: The memory bank (the SelfReference).
        key: The memory key of the turn.
        forks: The turn's forks.
    """

    bank: MemoryBank
    key: str
    forks: ForkManager


ACTIVE_TURN: ContextVar[Turn | None] = ContextVar("simplellmfunc_selfref_turn", default=None)


def current_turn(bank: MemoryBank) -> Turn | None:
    """The turn of ``bank`` whose tool call is running in this context, if any."""
    turn = ACTIVE_TURN.get()
    return turn if turn is not None and turn.bank is bank else None


def active_turn(bank: MemoryBank) -> Turn:
    """Like :func:`current_turn`, for primitives that need a running turn.

    Raises:
        UserError: Outside a tool call of an ``@llm_chat`` turn bound to ``bank``.
    """
    turn = current_turn(bank)
    if turn is None:
        raise UserError(
            "runtime.selfref.fork.* works only inside execute_code during an @llm_chat turn "
            "bound to this SelfReference"
        )
    return turn


def active_key(bank: MemoryBank, key: str | None = None) -> str:
    """``key``, or the key of the turn whose tool call is running in this context (else the
    most recently started turn of ``bank`` that is still running, else the only key ``bank``
    has state for).

    Raises:
        UserError: If ``key`` is not a non-empty string, or none is given, no turn is running
            and the bank does not hold exactly one key.
    """
    if key is not None:
        if not isinstance(key, str) or not key:
            raise UserError("a memory key must be a non-empty string")
        return key
    turn = current_turn(bank)
    if turn is not None:  # the turn whose tool call is running (forks run concurrently)
        return turn.key
    latest = bank.latest_turn_key()
    if latest is not None:
        return latest
    keys = bank.keys()
    if len(keys) != 1:
        raise UserError("no @llm_chat turn bound to this SelfReference is running; pass key=")
    return keys[0]
