"""The engine's step runner on DBOS: each LLM call and each tool call is a DBOS step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from dbos import DBOS

from ..._mutations import ContextMutation, UserMessageMutation
from ...engine import RunHook, RunView, StepKind, running_steps
from ...exceptions import StepInterruptedError
from ._journal import StepJournal, now_ms

__all__ = ["RESUME_NOTE", "DBOSStepRunner"]

T = TypeVar("T")

RESUME_NOTE = (
    "[Note from the runtime: this run was interrupted and resumed in a new process. The "
    "messages above are from before the restart. In-memory state of tools is gone: a Python "
    "(PyRepl) kernel is new, so variables, imports and open files from earlier cells must be "
    "recreated before they are used.]"
)


class DBOSStepRunner(RunHook):
    """Hands out DBOS step ids in the order the loop reaches its calls.

    A step recorded by an earlier attempt is replayed from the journal read when this attempt
    started; any other runs and is recorded (one write per step, see :class:`StepJournal`).

    As a run hook it tells the model, once, that a resumed run lost its in-memory tool state:
    before the first LLM call that follows the last step recorded before the crash.

    Args:
        journal: The workflow's step records, as read when this attempt started.
        note: The note for a resumed run (``None``: no note).
    """

    def __init__(self, journal: StepJournal, note: str | None = RESUME_NOTE) -> None:
        self.journal = journal
        self._last_recorded = max(journal.recorded, default=-1)
        self._last_reserved = -1
        self._noted = not journal.recorded or note is None
        self._note = note or ""
        self.replayed = 0
        self.executed = 0

    @property
    def resumed(self) -> bool:
        """Whether this attempt re-executes a run that had recorded steps."""
        return self._last_recorded >= 0

    def slot(self, kind: StepKind, name: str, *, idempotent: bool = True) -> _Slot:
        """Reserve the next step id (and one for a "began" marker of a non-idempotent tool)."""
        began = DBOS.reserve_step().step_id if kind == "tool" and not idempotent else None
        main = DBOS.reserve_step().step_id
        self._last_reserved = main
        return _Slot(self, f"{kind}:{name}", began, main)

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        if self._noted or self._last_reserved < self._last_recorded:
            return ()
        self._noted = True
        return (UserMessageMutation({"role": "user", "content": self._note}),)


class _Slot:
    __slots__ = ("_began", "_main", "_name", "_runner")

    def __init__(self, runner: DBOSStepRunner, name: str, began: int | None, main: int) -> None:
        self._runner = runner
        self._name = name
        self._began = began
        self._main = main

    async def run(self, func: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        runner, journal = self._runner, self._runner.journal
        recorded = journal.recorded.get(self._main)
        if recorded is not None:
            runner.replayed += 1
            value: T = recorded.replay(self._name)
            return value, True
        started = now_ms()
        try:
            value = await self._execute(func)
        except Exception as exc:  # recorded: a resumed run gets the same error back
            await journal.record(self._main, self._name, started, error=exc)
            raise
        await journal.record(self._main, self._name, started, output=value)
        runner.executed += 1
        return value, False

    async def _execute(self, func: Callable[[], Awaitable[T]]) -> T:
        journal = self._runner.journal
        if self._began is not None:
            marker = f"began {self._name}"
            if self._began in journal.recorded:
                journal.recorded[self._began].replay(marker)
                raise StepInterruptedError(
                    f"{self._name.partition(':')[2]} was interrupted by a restart; it is not "
                    "idempotent, so it was not run again: it may or may not have taken effect"
                )
            await journal.record(self._began, marker, now_ms(), output=True)
        with running_steps(None):  # an agent inside a tool runs plainly, within this step
            return await func()
