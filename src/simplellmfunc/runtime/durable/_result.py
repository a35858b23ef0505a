"""What a durable run returns, and a handle on one started elsewhere."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from dbos import DBOS, WorkflowHandleAsync
from dbos import error as dbos_error

from ..._events import ApprovalRequestEvent
from ...engine import ApprovalDecision
from ...exceptions import AnswerRefusedError, DurableError
from ._local import abort_local
from ._parking import ParkedRuns, current_parking
from ._waits import ANSWER_TOPIC, answer_message, waiting_requests

__all__ = [
    "WAITING",
    "DurableHandle",
    "DurableResult",
    "check_waiting",
    "park_status",
    "wait_result",
    "wake",
]

WAITING = "WAITING"
"""The status of a parked run: it waits for an answer off its queue (DBOS says CANCELLED)."""

_PARKED_POLL_S = 0.2


@dataclass(frozen=True, slots=True)
class DurableResult:
    """The outcome of a durable run.

    Attributes:
        workflow_id: The run's id in the system database.
        text: The last reply text (``@llm_chat``), or ``""``.
        history: The final history (``@llm_chat``), or ``None``.
        value: The return value of an ``@llm_function`` (``None`` for ``@llm_chat``).
        resumed: Whether the attempt that finished had resumed recorded steps.
        replayed_steps: Steps whose recorded result was used instead of running them again.
        executed_steps: Steps that ran in the attempt that finished.
    """

    workflow_id: str
    text: str = ""
    history: list[dict[str, Any]] | None = field(default=None, hash=False)
    value: Any = field(default=None, hash=False)
    resumed: bool = False
    replayed_steps: int = 0
    executed_steps: int = 0


@dataclass(frozen=True, slots=True)
class DurableHandle:
    """A durable run that was started or enqueued; it may run in another process."""

    workflow_id: str

    async def result(self, timeout: float | None = None) -> DurableResult:
        """Wait for the run to finish (in whatever process runs it) and return its result.

        Raises:
            DurableError: If the run failed, was cancelled, or does not exist.
        """
        return await wait_result(self.workflow_id, timeout, parked=current_parking())

    async def status(self) -> str:
        """The run's status: ``PENDING``, ``ENQUEUED``, ``SUCCESS``, ``ERROR``, ``CANCELLED``...
        or ``WAITING``: parked, waiting for an answer off its queue.

        Raises:
            DurableError: If there is no such run.
        """
        status = await DBOS.get_workflow_status_async(self.workflow_id)
        if status is None:
            raise DurableError(f"no durable run {self.workflow_id!r}")
        return await park_status(current_parking(), self.workflow_id, str(status.status))

    async def waiting(self) -> list[ApprovalRequestEvent]:
        """The run's tool calls waiting for approval now (whichever process runs it, or none
        while it waits to be resumed)."""
        steps = await DBOS.list_workflow_steps_async(self.workflow_id)
        return waiting_requests(steps)

    async def answer(self, request_id: str, answer: ApprovalDecision) -> None:
        """Answer the run's approval request ``request_id`` (its call id), durably: the run
        gets the answer wherever and whenever it runs next, after a crash too.

        Raises:
            AnswerRefusedError: If no request of the run waits under that id.
        """
        message = answer_message(request_id, answer)
        workflow_id = self.workflow_id
        await check_waiting(workflow_id, request_id, await self.waiting())
        await DBOS.send_async(workflow_id, message, ANSWER_TOPIC, idempotency_key=request_id)
        store = current_parking()
        if store is not None:
            await wake(store, workflow_id, self._dbos_status, _resume)

    async def abort(self) -> None:
        """Cancel the run durably: it stops at its next step, wherever it runs, and is not
        resumed; a run of this process also stops its current LLM or tool call."""
        store = current_parking()
        if store is not None:
            await store.forget(self.workflow_id)  # a parked run: no answer resumes it now
        # Cancelled in the database first: the run, stopped next, cannot record a success.
        await DBOS.cancel_workflow_async(self.workflow_id)
        abort_local(self.workflow_id, "aborted through its durable handle")

    async def _dbos_status(self) -> str | None:
        status = await DBOS.get_workflow_status_async(self.workflow_id)
        return None if status is None else str(status.status)


async def _resume(workflow_id: str, queue: str) -> None:
    await DBOS.resume_workflow_async(workflow_id, queue_name=queue)


async def wake(
    store: ParkedRuns,
    workflow_id: str,
    status: Callable[[], Awaitable[str | None]],
    resume: Callable[[str, str], Awaitable[None]],
) -> None:
    """After an answer was sent: resume the run on its queue if it is parked and this caller
    wins it (see :mod:`._parking`)."""
    cancelled = await status() == "CANCELLED"
    queue = await store.answered(workflow_id, cancelled=cancelled)
    if queue is not None:
        await resume(workflow_id, queue)


async def park_status(store: ParkedRuns | None, workflow_id: str, status: str) -> str:
    """``status`` as DBOS gives it, or :data:`WAITING` for a parked run."""
    if status == "CANCELLED" and store is not None and await store.is_parked(workflow_id):
        return WAITING
    return status


async def check_waiting(
    workflow_id: str, request_id: str, waiting: list[ApprovalRequestEvent]
) -> None:
    """Refuse an answer to a request the run does not wait for.

    Raises:
        AnswerRefusedError: If no request ``request_id`` of ``workflow_id`` waits.
    """
    if not any(request.request_id == request_id for request in waiting):
        raise AnswerRefusedError(
            f"durable run {workflow_id!r} has no approval request {request_id!r} waiting"
        )


async def wait_result(
    workflow_id: str,
    timeout: float | None,
    retrieve: Callable[[str], Awaitable[WorkflowHandleAsync[Any]]] = DBOS.retrieve_workflow_async,
    *,
    parked: ParkedRuns | None = None,
) -> DurableResult:
    """The result of the run ``workflow_id`` once it is done (``retrieve``: how its handle is
    found, in this process's DBOS or through a client; ``parked``: the parked runs, whose
    wait goes on while they wait for an answer).

    Raises:
        DurableError: If the run failed, was cancelled, or does not exist.
        TimeoutError: If ``timeout`` seconds passed first.
    """
    try:
        handle = await retrieve(workflow_id)
        with anyio.fail_after(timeout):
            while True:
                try:
                    result = await handle.get_result(polling_interval_sec=0.05)
                    break
                except dbos_error.DBOSAwaitedWorkflowCancelledError:
                    if parked is None or not await parked.is_parked(workflow_id):
                        raise
                await anyio.sleep(_PARKED_POLL_S)  # parked: until an answer resumes it
    except TimeoutError:
        raise
    except Exception as exc:  # boundary: DBOS's errors become ours
        raise DurableError(f"durable run {workflow_id!r}: {exc}") from exc
    if not isinstance(result, DurableResult):
        raise DurableError(f"durable run {workflow_id!r} returned {type(result).__name__}")
    return result
