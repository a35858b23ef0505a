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

import anyio
from dbos import DBOS, StepReservation
from dbos import error as dbos_error

from ..._events import ApprovalRequestEvent
from ..._mutations import ContextMutation, UserMessageMutation
from ...engine import ApprovalDecision, RunHook, RunView, StepKind, running_steps
from ...exceptions import StepInterruptedError
from ._journal import recorded_steps
from ._parking import current_parking, outside_workflow
from ._waits import ANSWER_TOPIC, DurableWaits, asked_record

__all__ = ["RESUME_NOTE", "DBOSStepRunner"]

T = TypeVar("T")

_INTERNAL_QUEUE_PREFIX = "_dbos_internal"

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

    A run taken from a queue that waits ``park_after`` seconds for an answer, with no other
    call of it running, parks (:meth:`park`, see :mod:`._parking`): it gives its queue slot
    back, and the answer resumes it.

    Args:
        workflow_id: The run's workflow id.
        note: The note for a resumed run (``None``: no note).
        park_after: Seconds a queued run waits for an answer before it parks (``None``: it
            never parks; it holds its queue slot while it waits).
    """

    def __init__(
        self, workflow_id: str, note: str | None = RESUME_NOTE, park_after: float | None = None
    ) -> None:
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
        self.parks = 0
        self._park_after = park_after
        self._queue: str | None = None  # the queue a parked run goes back to
        self._checked_queue = False
        self._running = 0  # steps of the run in flight (a park waits until none is)
        self._quiet = anyio.Event()

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
        if not self._checked_queue:
            self._checked_queue = True
            await self._may_park()
        return await self.waits.answer(request.tool_call_id)

    async def _may_park(self) -> None:
        """Let the waits park the run if it came from a queue and a runtime keeps parked runs."""
        if self._park_after is None or current_parking() is None:
            return
        workflow_id = self.workflow_id
        status = await outside_workflow(lambda: DBOS.get_workflow_status(workflow_id))
        queue = status.queue_name if status is not None else None
        if queue and not queue.startswith(_INTERNAL_QUEUE_PREFIX):
            self._queue = queue
            self.waits.park_after(self._park_after, self.park)

    async def park(self) -> Any:
        """Park the run, which waits for an answer: give its queue slot back until the answer
        resumes it (see :mod:`._parking`).

        Waits until no other call of the run is running, records the ``park`` step, notes the
        run as parking, receives once more, then cancels the run (DBOS frees its slot).

        Returns:
            A message received meanwhile (the run goes on), or ``None`` when an earlier
            attempt made this park (this attempt was resumed past it: it receives again).

        Raises:
            DBOSWorkflowCancelledError: Once parked: this attempt ends here.
        """
        store, queue, workflow_id = current_parking(), self._queue, self.workflow_id
        assert store is not None
        assert queue is not None
        while self._running:
            await self._quiet.wait()
        fresh = await _ran(DBOS.reserve_step(), "park", _true)
        if fresh:
            await store.parking(workflow_id, queue)
        message = await DBOS.recv_async(ANSWER_TOPIC, timeout_seconds=0)
        if not fresh:
            return message
        if message is not None:
            await store.forget(workflow_id)
            return message
        await outside_workflow(lambda: DBOS.cancel_workflow(workflow_id))
        self.parks += 1
        if await store.settle(workflow_id):  # answered while parking: resumed at once
            await outside_workflow(lambda: DBOS.resume_workflow(workflow_id, queue_name=queue))
        raise dbos_error.DBOSWorkflowCancelledError(
            f"durable run {workflow_id!r} parked: it waits for an answer off its queue"
        )

    def steps_running(self, change: int) -> None:
        """A step of the run began (``+1``) or ended (``-1``)."""
        self._running += change
        if not self._running:
            self._quiet.set()
            self._quiet = anyio.Event()

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
        runner.steps_running(+1)
        try:
            return await self._run(func)
        finally:
            runner.steps_running(-1)

    async def _run(self, func: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
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
