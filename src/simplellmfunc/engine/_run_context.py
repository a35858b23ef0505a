"""What a run hook may use of the running call besides reading it.

A :class:`RunContext` is created once per run and handed to hooks through
:attr:`~._invocation.RunView.context`: the run's emitter (and so its event origin), its abort
signal, its usage total, and — when the run is driven by :func:`~._loop.run_react` — a task group
for background work that must not outlive the run (SelfReference forks run there). Tasks still
running when the run ends are cancelled.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from ..exceptions import UserError

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._abort import AbortSignal
    from .._events import EventOrigin
    from .._usage import Usage
    from ._emit import Emitter
    from ._state import RunState

__all__ = ["RunContext"]


class RunContext:
    """The running call's services for hooks: background tasks, events, abort, usage.

    Args:
        state: The run's state (its usage total is what :meth:`add_usage` adds to).
        emitter: The run's emitter.
        abort: The run's abort signal, if any.
    """

    __slots__ = ("_state", "_tasks", "abort", "emitter")

    def __init__(self, state: RunState, emitter: Emitter, abort: AbortSignal | None) -> None:
        self._state = state
        self._tasks: TaskGroup | None = None
        self.emitter = emitter
        self.abort = abort

    @property
    def origin(self) -> EventOrigin:
        """The event origin of the run (its agent call id, fork id and depth)."""
        return self.emitter.origin

    @property
    def usage(self) -> Usage:
        """Usage of the run so far (background work reported with :meth:`add_usage` included)."""
        return self._state.usage

    @property
    def task_group(self) -> TaskGroup | None:
        """The run's task group; ``None`` when the run is stepped by its caller (no task)."""
        return self._tasks

    def add_usage(self, usage: Usage) -> None:
        """Add ``usage`` of background work (a fork's LLM calls) to the run's total."""
        self._state.usage = self._state.usage + usage

    def start_soon(
        self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str | None = None
    ) -> None:
        """Start ``func(*args)`` in the run's task group; it is cancelled if the run ends first.

        Raises:
            UserError: If the run has no task group (it is driven with ``ReactRun.step``
                instead of ``run_react``).
        """
        if self._tasks is None:
            raise UserError(
                "this run has no task group for background work: drive it with run_react "
                "(a run stepped with ReactRun.step has none)"
            )
        self._tasks.start_soon(func, *args, name=name)

    def bind(self, tasks: TaskGroup | None) -> None:
        """Set (or clear) the run's task group; called by the loop."""
        self._tasks = tasks
