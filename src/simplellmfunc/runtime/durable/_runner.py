"""The engine's step runner on DBOS: each LLM call and each tool call is a DBOS step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from dbos import DBOS, StepReservation

from ..._mutations import ContextMutation, UserMessageMutation
from ...engine import RunHook, RunView, StepKind, running_steps
from ...exceptions import StepInterruptedError

__all__ = ["RESUME_NOTE", "DBOSStepRunner"]

T = TypeVar("T")

RESUME_NOTE = (
    "[Note from the runtime: this run was interrupted and resumed in a new process. The "
    "messages above are from before the restart. In-memory state of tools is gone: a Python "
    "(PyRepl) kernel is new, so variables, imports and open files from earlier cells must be "
    "recreated before they are used.]"
)


class DBOSStepRunner(RunHook):
    """Hands out DBOS step reservations in the order the loop reaches its calls.

    As a run hook it tells the model, once, that a resumed run lost its in-memory tool state:
    before the first LLM call that follows the last step recorded before the crash.

    Args:
        recorded: The ids of the steps the workflow had recorded when this attempt started
            (empty for a fresh run).
        note: The note for a resumed run (``None``: no note).
    """

    def __init__(self, recorded: frozenset[int], note: str | None = RESUME_NOTE) -> None:
        self._last_recorded = max(recorded, default=-1)
        self._last_reserved = -1
        self._noted = not recorded or note is None
        self._note = note or ""
        self.replayed = 0
        self.executed = 0

    @property
    def resumed(self) -> bool:
        """Whether this attempt re-executes a run that had recorded steps."""
        return self._last_recorded >= 0

    def slot(self, kind: StepKind, name: str, *, idempotent: bool = True) -> _Slot:
        """Reserve the next step id (and one for a "began" marker of a non-idempotent tool)."""
        began = DBOS.reserve_step() if kind == "tool" and not idempotent else None
        main = DBOS.reserve_step()
        self._last_reserved = main.step_id
        return _Slot(self, f"{kind}:{name}", began, main)

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        if self._noted or self._last_reserved < self._last_recorded:
            return ()
        self._noted = True
        return (UserMessageMutation({"role": "user", "content": self._note}),)


class _Slot:
    __slots__ = ("_began", "_main", "_name", "_runner")

    def __init__(
        self,
        runner: DBOSStepRunner,
        name: str,
        began: StepReservation | None,
        main: StepReservation,
    ) -> None:
        self._runner = runner
        self._name = name
        self._began = began
        self._main = main

    async def run(self, func: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        began_now = False

        async def begin() -> bool:
            nonlocal began_now
            began_now = True
            return True

        if self._began is not None:
            await self._began.run_async({"name": f"began {self._name}"}, begin)
        executed = False

        async def body() -> Any:
            nonlocal executed
            if self._began is not None and not began_now:
                raise StepInterruptedError(
                    f"{self._name.partition(':')[2]} was interrupted by a restart; it is not "
                    "idempotent, so it was not run again: it may or may not have taken effect"
                )
            executed = True
            with running_steps(None):  # an agent inside a tool runs plainly, within this step
                return await func()

        value: T = await self._main.run_async({"name": self._name}, body)
        if executed:
            self._runner.executed += 1
        else:
            self._runner.replayed += 1
        return value, not executed
