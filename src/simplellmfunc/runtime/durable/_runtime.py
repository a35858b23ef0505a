"""``DurableRuntime``: DBOS configured, launched and shut down for this process."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
from dbos import DBOS

from ..._resource import AsyncResource
from ...exceptions import DurableError
from ._config import DurableConfig, QueueConfig
from ._parking import ParkedRuns, current_parking, use_parking
from ._result import DurableHandle, DurableResult, wait_result
from ._workflow import durable_workflow

__all__ = ["DurableRuntime"]


class DurableRuntime(AsyncResource):
    """DBOS for this process: ``async with DurableRuntime(config):`` around durable runs.

    Launching resumes the unfinished runs recorded under this process's ``executor_id`` (a
    SIGKILLed process restarted with the same id picks its runs up) and, with ``listen``,
    consumes those queues: a worker process.

    Args:
        config: Where runs are recorded and which queues exist.
        listen: Names of the queues this process takes sessions from (``()``: none, the
            process only starts and enqueues runs; ``None``: every declared queue).

    Raises:
        DurableError: If another runtime is active in this process (DBOS is one per process).
    """

    def __init__(self, config: DurableConfig | None = None, *, listen: Sequence[str] | None = ()):
        self.config = config or DurableConfig()
        self._listen = None if listen is None else tuple(listen)
        self._launched = False

    async def open(self) -> None:
        """Launch (what ``async with runtime:`` does; :meth:`launch` is the same)."""
        await self.launch()

    async def aclose(self) -> None:
        """Shut down (what leaving ``async with runtime:`` does; :meth:`shutdown` is the same)."""
        await self.shutdown()

    async def launch(self) -> None:
        """Configure and launch DBOS, resume this executor's unfinished runs, declare queues."""
        if self._launched:
            return
        durable_workflow()  # registered before launch: recovery and queues need it
        config: Any = self.config.dbos_config()
        listen = self._listen
        for name in listen or ():
            self.config.queue(name)  # an unknown queue is a ConfigError before anything runs

        def launch() -> None:
            DBOS(config=config)
            if listen is not None:
                DBOS.listen_queues(list(listen))
            DBOS.launch()

        store = ParkedRuns(config["system_database_url"])
        use_parking(store)  # before launch: a resumed run may park at once
        try:
            # In this thread, on purpose: DBOS then runs the workflows it starts itself
            # (resumed runs, sessions from a queue) on this event loop, where the agents'
            # LLM clients live, instead of a loop of its own.
            launch()
        except Exception as exc:  # boundary: DBOS's errors become ours
            use_parking(None)
            store.close()
            await anyio.to_thread.run_sync(_destroy)
            raise DurableError(f"cannot launch the durable runtime: {exc}") from exc
        self._launched = True
        for queue in self.config.queues:
            await _register(queue)

    async def shutdown(self) -> None:
        """Shut DBOS down; runs still going are left as they are, to be resumed later."""
        if not self._launched:
            return
        self._launched = False
        await anyio.to_thread.run_sync(_destroy)
        store = current_parking()
        use_parking(None)
        if store is not None:
            store.close()

    async def result(self, workflow_id: str, timeout: float | None = None) -> DurableResult:
        """The result of the run ``workflow_id``, once it is done (whichever process runs it).

        Raises:
            DurableError: If the run failed, was cancelled, or does not exist.
            TimeoutError: If ``timeout`` seconds passed first.
        """
        return await wait_result(workflow_id, timeout, parked=current_parking())

    def handle(self, workflow_id: str) -> DurableHandle:
        """A handle on the run ``workflow_id`` (status, result, abort)."""
        return DurableHandle(workflow_id)


async def _register(queue: QueueConfig) -> None:
    limiter: Any = (
        {"limit": queue.rate_limit, "period": queue.rate_period} if queue.rate_limit else None
    )
    await DBOS.register_queue_async(
        queue.name,
        worker_concurrency=queue.worker_concurrency,
        global_concurrency=queue.concurrency,
        limiter=limiter,
        polling_interval_sec=queue.polling_interval,
        on_conflict="always_update",
    )


def _destroy() -> None:
    DBOS.destroy(destroy_registry=False)
