"""``DurableAgent``: a decorated function whose calls are durable runs."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from ...exceptions import ConfigError, DurableError
from ..otel import GenAITracing
from ._result import DurableHandle, DurableResult
from ._workflow import AgentEntry, EventCallback, durable_workflow, register_agent

__all__ = ["DurableAgent"]


class DurableAgent:
    """Make every call of an ``@llm_chat`` or ``@llm_function`` a durable run.

    Each call is a DBOS workflow; each LLM call and each tool call of it is a step whose
    result is recorded. A process killed mid-run resumes it on restart (when its
    :class:`DurableRuntime` launches) from the last recorded step: recorded calls are not made
    again; a call that was running when the process died runs again (at least once), unless
    its tool says ``idempotent=False`` (then the model is told it was interrupted).

    Create durable agents before the runtime launches (DBOS needs its workflows registered
    first), with the same names in every process that runs them.

    Args:
        func: The decorated function (``@llm_chat`` or ``@llm_function``).
        name: Its name in the system database (default: the function's qualified name).
        on_event: Called with each ``EventYield`` when ``func`` yields events
            (``enable_event=True``); steps whose result was replayed from the record are
            marked by a ``CustomEvent`` named ``"step_replayed"``.
        resume_note: Tell the model, when a run resumes, that in-memory tool state is gone.
        tracing: Make OpenTelemetry spans of each run (``invoke_agent``, ``chat``,
            ``execute_tool``), children of the caller's span even when the run is resumed or
            dequeued in another process.
        park_after: A run taken from a queue that has waited this many seconds for an
            approval (no other call of it running) parks: it gives its queue slot back, and
            the answer puts it back on its queue (``None``: it holds its slot while it waits).

    Raises:
        ConfigError: If ``park_after`` is negative.
    """

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        on_event: EventCallback | None = None,
        resume_note: bool = True,
        tracing: GenAITracing | None = None,
        park_after: float | None = 5.0,
    ) -> None:
        if park_after is not None and not park_after >= 0:
            raise ConfigError(f"park_after must be a number of seconds >= 0, got {park_after!r}")
        self.name = name or f"{func.__module__}.{func.__qualname__}"
        self.func = func
        self.tracing = tracing
        entry = AgentEntry(func, on_event, resume_note, tracing, park_after)
        register_agent(self.name, entry)
        durable_workflow()

    async def start(
        self, *args: Any, workflow_id: str | None = None, **kwargs: Any
    ) -> DurableHandle:
        """Start a durable run in this process and return its handle at once.

        ``workflow_id`` names the run (starting an id that exists returns its handle and
        does not run it twice). Arguments must be picklable (they are recorded).
        """
        return DurableHandle((await self._start(args, kwargs, workflow_id)).workflow_id)

    async def _start(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], workflow_id: str | None
    ) -> WorkflowHandleAsync[DurableResult]:
        with SetWorkflowID(workflow_id) if workflow_id else nullcontext():
            return await DBOS.start_workflow_async(
                durable_workflow(), self.name, args, kwargs, self._carrier()
            )

    def _carrier(self) -> dict[str, str]:
        return self.tracing.inject() if self.tracing is not None else {}

    async def run(self, *args: Any, workflow_id: str | None = None, **kwargs: Any) -> DurableResult:
        """Run to the end in this process (a durable run) and return the result.

        Raises:
            DurableError: If the run failed or was cancelled.
        """
        handle = await self._start(args, kwargs, workflow_id)
        try:
            return await handle.get_result()  # the run's own task here: no polling
        except Exception as exc:  # boundary: DBOS's errors become ours
            raise DurableError(f"durable run {handle.workflow_id!r}: {exc}") from exc

    async def enqueue(
        self, queue: str, *args: Any, workflow_id: str | None = None, **kwargs: Any
    ) -> DurableHandle:
        """Put a run on ``queue`` for a worker process (``simplellmfunc worker``) to execute."""
        with SetWorkflowID(workflow_id) if workflow_id else nullcontext():
            handle: WorkflowHandleAsync[DurableResult] = await DBOS.enqueue_workflow_async(
                queue, durable_workflow(), self.name, args, kwargs, self._carrier()
            )
        return DurableHandle(handle.workflow_id)
