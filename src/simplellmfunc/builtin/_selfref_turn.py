"""The ``@llm_chat`` turn whose tool call is running: what SelfReference primitives act on.

The run hook sets the turn in a context variable when the turn starts, in the run's task; tool
calls, and through the PyRepl bridge the primitives they call, run in tasks started from there
and so see it. Concurrent turns (forks running beside their parent) each see their own, which
"the most recently started turn" could not tell apart.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..exceptions import UserError

if TYPE_CHECKING:
    from ..engine._invocation import RunHook, RunView
    from ._selfref import SelfReference
    from ._selfref_fork import ForkManager

__all__ = ["ACTIVE_TURN", "Turn", "active_turn", "current_turn"]


@dataclass(slots=True)
class Turn:
    """One running turn bound to ``key`` of ``owner``.

    Attributes:
        owner: The SelfReference.
        key: The memory key of the turn.
        hook: The run hook of the turn (forks get one for their own key in its place).
        view: The run as the hook saw it at the start (the transcript is the live one).
        forks: The turn's forks, created on the first spawn.
    """

    owner: SelfReference
    key: str
    hook: RunHook
    view: RunView
    forks: ForkManager | None = None

    def fork_manager(self) -> ForkManager:
        """The turn's fork manager (created on first use)."""
        if self.forks is None:
            from ._selfref_fork import ForkManager

            self.forks = ForkManager(self)
        return self.forks


ACTIVE_TURN: ContextVar[Turn | None] = ContextVar("simplellmfunc_selfref_turn", default=None)


def current_turn(owner: SelfReference) -> Turn | None:
    """The turn of ``owner`` whose tool call is running in this context, if any."""
    turn = ACTIVE_TURN.get()
    return turn if turn is not None and turn.owner is owner else None


def active_turn(owner: SelfReference) -> Turn:
    """Like :func:`current_turn`, for primitives that need a running turn.

    Raises:
        UserError: Outside a tool call of an ``@llm_chat`` turn bound to ``owner``.
    """
    turn = current_turn(owner)
    if turn is None:
        raise UserError(
            "runtime.selfref.fork.* works only inside execute_code during an @llm_chat turn "
            "bound to this SelfReference"
        )
    return turn
