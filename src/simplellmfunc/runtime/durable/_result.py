"""What a durable run returns, and a handle on one started elsewhere."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from dbos import DBOS, WorkflowHandleAsync

from ..._events import ApprovalRequestEvent
from ...engine import ApprovalDecision
from ...exceptions import AnswerRefusedError, DurableError
from ._local import abort_local
from ._waits import ANSWER_TOPIC, answer_message, waiting_requests

__all__ = ["DurableHandle", "DurableResult", "check_waiting", "wait_result"]


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
        return await wait_result(self.workflow_id, timeout)

    async def status(self) -> str:
        """The run's status: ``PENDING``, ``ENQUEUED``, ``SUCCESS``, ``ERROR``, ``CANCELLED``...

        Raises:
            DurableError: If there is no such run.
        """
        status = await DBOS.get_workflow_status_async(self.workflow_id)
        if status is None:
            raise DurableError(f"no durable run {self.workflow_id!r}")
        return str(status.status)

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
        await check_waiting(self.workflow_id, request_id, await self.waiting())
        await DBOS.send_async(self.workflow_id, message, ANSWER_TOPIC, idempotency_key=request_id)

    async def abort(self) -> None:
        """Cancel the run durably: it stops at its next step, wherever it runs, and is not
        resumed; a run of this process also stops its current LLM or tool call."""
        # Cancelled in the database first: the run, stopped next, cannot record a success.
        await DBOS.cancel_workflow_async(self.workflow_id)
        abort_local(self.workflow_id, "aborted through its durable handle")


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
) -> DurableResult:
    """The result of the run ``workflow_id`` once it is done (``retrieve``: how its handle is
    found, in this process's DBOS or through a client).

    Raises:
        DurableError: If the run failed, was cancelled, or does not exist.
        TimeoutError: If ``timeout`` seconds passed first.
    """
    try:
        handle = await retrieve(workflow_id)
        with anyio.fail_after(timeout):
            result = await handle.get_result(polling_interval_sec=0.05)
    except TimeoutError:
        raise
    except Exception as exc:  # boundary: DBOS's errors become ours
        raise DurableError(f"durable run {workflow_id!r}: {exc}") from exc
    if not isinstance(result, DurableResult):
        raise DurableError(f"durable run {workflow_id!r} returned {type(result).__name__}")
    return result
