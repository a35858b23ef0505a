"""The engine's step runner on DBOS: each LLM call and each tool call is a DBOS step.

Only DBOS's public API: a step id is drawn with ``DBOS.reserve_step()`` when the loop reaches
the call (synchronously, in a deterministic order), and the call runs at it with
``StepReservation.run_async``, which is DBOS's own step: it checks that the run is not
cancelled, returns the recorded result of a step run by an earlier attempt (the call is not
made again), or runs the call and records its result after checking that this execution still
owns the run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from dbos import DBOS, StepReservation

from ..._events import ApprovalRequestEvent
from ..._mutations import ContextMutation, UserMessageMutation
from ...engine import ApprovalDecision, RunHook, RunView, StepKind, running_steps
from ...exceptions import StepInterruptedError
from ._journal import recorded_steps
from ._waits import DurableWaits, asked_record

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

    As a run hook it tells the model, once, that a resumed run lost its in-memory tool state:
    before the first LLM call that follows the last step recorded before the crash. As an
    approver (:meth:`approve`) it makes a tool call's wait for a person durable: the request
    is recorded as a step, the answer comes as a DBOS message (see :mod:`._waits`).

    Which steps an earlier attempt recorded is read only when the attempt turns out to resume
    one: when its first step (the first LLM call, which comes before any other) is replayed. A
    fresh run, the common case, never reads it.

    Args:
        workflow_id: The run's workflow id.
        note: The note for a resumed run (``None``: no note).
    """

    def __init__(self, workflow_id: str, note: str | None = RESUME_NOTE) -> None:
        self.workflow_id = workflow_id
        self.recorded: dict[int, str] | None = None  # unknown until the first step ran
        self._last_recorded = -1
        self._last_reserved = -1
        self._noted = note is None
        self._note = note or ""
        self._asks: dict[str, StepReservation] = {}
        self.waits = DurableWaits()
        self.replayed = 0
        self.executed = 0

    @property
    def resumed(self) -> bool:
        """Whether this attempt re-executes a run that had recorded steps."""
        return self._last_recorded >= 0

    def slot(
        self,
        kind: StepKind,
        name: str,
        *,
        idempotent: bool = True,
        approval_id: str | None = None,
    ) -> _Slot:
        """Reserve the next step id (one more for a call that may wait for approval, and one
        for the "began" marker of a non-idempotent tool)."""
        if approval_id is not None:
            self._asks[approval_id] = DBOS.reserve_step()
        began = DBOS.reserve_step() if kind == "tool" and not idempotent else None
        main = DBOS.reserve_step()
        self._last_reserved = main.step_id
        return _Slot(self, f"{kind}:{name}", began, main)

    async def approve(self, request: ApprovalRequestEvent) -> ApprovalDecision:
        """Wait durably for the answer to ``request`` (the run's approver).

        The request is recorded first, as a step (``approval:<tool>``) that other processes
        read (:meth:`DurableHandle.waiting`); then the run waits for the answer, sent with
        :meth:`DurableHandle.answer` / :meth:`DurableClient.answer`, in ``DBOS.recv``. A run
        resumed after a crash finds its recorded request and its recorded answer, if any.
        """
        ask = self._asks.pop(request.tool_call_id, None)
        if ask is not None:
            record = asked_record(request)

            async def asked() -> dict[str, Any]:
                return record

            await ask.run_async({"name": f"approval:{request.tool_name}"}, asked)
        return await self.waits.answer(request.tool_call_id)

    async def first_step(self, replayed: bool) -> None:
        """The attempt's first step ran (or was replayed): learn whether the attempt resumes."""
        self.recorded = await recorded_steps(self.workflow_id) if replayed else {}
        self._last_recorded = max(self.recorded, default=-1)

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        if self._noted or not self.recorded or self._last_reserved < self._last_recorded:
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
        runner = self._runner
        interrupted = False
        if self._began is not None:
            # Recorded before the call: found on resume without the call's result, the call
            # may or may not have taken effect; it is not run again. (With the result recorded
            # too, DBOS returns that below and the call is not made either.)
            interrupted = not await _ran(self._began, f"began {self._name}", _true)
        called = False

        async def step() -> T:
            nonlocal called
            called = True
            if interrupted:
                raise StepInterruptedError(
                    f"{self._name.partition(':')[2]} was interrupted by a restart; it is not "
                    "idempotent, so it was not run again: it may or may not have taken effect"
                )
            with running_steps(None):  # an agent inside a tool runs plainly, within this step
                return await func()

        try:
            value: T = await self._main.run_async({"name": self._name}, step)
        finally:
            if called:
                runner.executed += 1
            else:
                runner.replayed += 1
            if runner.recorded is None:
                await runner.first_step(replayed=not called)
        return value, not called


async def _true() -> bool:
    return True


async def _ran(reservation: StepReservation, name: str, func: Callable[[], Awaitable[T]]) -> bool:
    """Run ``func`` as the step ``reservation``; whether it ran (``False``: it was recorded)."""
    ran = False

    async def step() -> T:
        nonlocal ran
        ran = True
        return await func()

    await reservation.run_async({"name": name}, step)
    return ran
