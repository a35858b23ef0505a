"""``DurableClient``: enqueue agent sessions and await their results from any process."""

from __future__ import annotations

from typing import Any

import anyio
from dbos import DBOSClient, EnqueueOptions, WorkflowHandleAsync

from ..._events import ApprovalRequestEvent
from ..._resource import AsyncResource
from ...engine import ApprovalDecision
from ...exceptions import DurableError
from ..otel import GenAITracing
from ._config import DurableConfig
from ._parking import ParkedRuns
from ._result import DurableResult, check_waiting, park_status, wait_result, wake
from ._waits import ANSWER_TOPIC, answer_message, waiting_requests
from ._workflow import WORKFLOW_NAME

__all__ = ["DurableClient"]


class DurableClient(AsyncResource):
    """Talks to the system database only: runs nothing, registers nothing, launches nothing.

    ``async with DurableClient(config) as client:`` then ``await client.enqueue(...)`` and
    ``await client.result(id)``; the sessions run in worker processes
    (``simplellmfunc worker CONFIG --queue NAME``). With ``tracing``, each session carries
    the current OpenTelemetry context: its spans, in the worker, join the caller's trace.
    """

    def __init__(self, config: DurableConfig, *, tracing: GenAITracing | None = None) -> None:
        self.config = config
        self.tracing = tracing
        self._client: DBOSClient | None = None
        self._parked: ParkedRuns | None = None

    async def open(self) -> None:
        """Connect to the system database (``async with`` does)."""
        if self._client is not None:
            return
        url = self.config.url()
        self._client = await anyio.to_thread.run_sync(
            lambda: DBOSClient(system_database_url=url, application_name=self.config.app_name)
        )
        self._parked = ParkedRuns(url)

    async def aclose(self) -> None:
        """Disconnect (idempotent)."""
        client, self._client = self._client, None
        parked, self._parked = self._parked, None
        if parked is not None:
            parked.close()
        if client is not None:
            await anyio.to_thread.run_sync(client.destroy)

    @property
    def _parking(self) -> ParkedRuns:
        if self._parked is None:
            raise DurableError("the client is not open; use 'async with DurableClient(...)'")
        return self._parked

    @property
    def _dbos(self) -> DBOSClient:
        if self._client is None:
            raise DurableError("the client is not open; use 'async with DurableClient(...)'")
        return self._client

    async def enqueue(
        self, queue: str, agent: str, *args: Any, workflow_id: str | None = None, **kwargs: Any
    ) -> str:
        """Put a session of the durable agent named ``agent`` on ``queue``; return its id.

        The arguments are the agent's (``message, history=[...]``); they must be picklable.
        """
        options: EnqueueOptions = {"workflow_name": WORKFLOW_NAME, "queue_name": queue}
        if workflow_id is not None:
            options["workflow_id"] = workflow_id
        if self.config.app_version:
            options["app_version"] = self.config.app_version
        carrier = self.tracing.inject() if self.tracing is not None else {}
        handle: WorkflowHandleAsync[Any] = await self._dbos.enqueue_async(
            options, agent, args, kwargs, carrier
        )
        return str(handle.get_workflow_id())

    async def result(self, workflow_id: str, timeout: float | None = None) -> DurableResult:
        """The session's result once a worker has finished it.

        Raises:
            DurableError: If the session failed, was cancelled, or does not exist.
            TimeoutError: If ``timeout`` seconds passed first.
        """
        retrieve = self._dbos.retrieve_workflow_async
        return await wait_result(workflow_id, timeout, retrieve, parked=self._parking)

    async def status(self, workflow_id: str) -> str:
        """The session's status (``ENQUEUED``, ``PENDING``, ``SUCCESS``, ``ERROR`` ...), or
        ``WAITING``: parked, waiting for an answer off its queue."""
        handle: WorkflowHandleAsync[Any] = await self._dbos.retrieve_workflow_async(workflow_id)
        status = await handle.get_status()
        return await park_status(self._parking, workflow_id, str(status.status))

    async def waiting(self, workflow_id: str) -> list[ApprovalRequestEvent]:
        """The session's tool calls waiting for approval now."""
        steps = await self._dbos.list_workflow_steps_async(workflow_id)
        return waiting_requests(steps)

    async def answer(self, workflow_id: str, request_id: str, answer: ApprovalDecision) -> None:
        """Answer the session's approval request ``request_id`` (its call id), durably: the
        session gets it wherever and whenever it runs next, after a worker died too.

        Raises:
            AnswerRefusedError: If no request of the session waits under that id.
        """
        message = answer_message(request_id, answer)
        await check_waiting(workflow_id, request_id, await self.waiting(workflow_id))
        await self._dbos.send_async(workflow_id, message, ANSWER_TOPIC, request_id)
        dbos = self._dbos

        async def status() -> str | None:
            handle: WorkflowHandleAsync[Any] = await dbos.retrieve_workflow_async(workflow_id)
            return str((await handle.get_status()).status)

        async def resume(workflow_id: str, queue: str) -> None:
            await dbos.resume_workflow_async(workflow_id, queue_name=queue)

        await wake(self._parking, workflow_id, status, resume)

    async def cancel(self, workflow_id: str) -> None:
        """Cancel the session: it stops at its next step and is not resumed (a parked one is
        not resumed by an answer either)."""
        await self._parking.forget(workflow_id)
        await self._dbos.cancel_workflow_async(workflow_id)
