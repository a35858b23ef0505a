"""``serve_queue``: this process becomes a worker of a queue of agent sessions."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import replace

import anyio

from ._config import DurableConfig
from ._heartbeat import Heartbeat
from ._runtime import DurableRuntime

__all__ = ["serve_queue", "worker_id"]


def worker_id() -> str:
    """A default executor id for a worker: ``host-pid`` (unique among live processes)."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def serve_queue(
    config: DurableConfig,
    queue: str,
    *,
    heartbeat: float | None = None,
    dead_after: float | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Run the sessions of ``queue`` in this process until cancelled.

    Register the agents the sessions name (:class:`DurableAgent`) first. The queue's limits
    (``concurrency`` across workers, ``worker_concurrency`` here, ``rate_limit``) come from
    ``config``. Every ``heartbeat`` seconds (default: ``config.heartbeat``) the worker records
    that it is alive; the unfinished sessions of a worker silent for ``dead_after`` seconds
    (default: ``config.dead_after``) are put back on the queue and resumed by a live worker
    from their last recorded step. ``dead_after`` must exceed the longest time a worker's event
    loop can be blocked, or a live worker's sessions run twice.

    Raises:
        ConfigError: If ``queue`` is not declared in ``config``.
        DurableError: If the runtime cannot launch.
    """
    config.queue(queue)
    if config.executor_id is None:
        config = replace(config, executor_id=worker_id())
    assert config.executor_id is not None
    beats = Heartbeat(
        config.url(),
        config.executor_id,
        queue,
        interval=heartbeat or config.heartbeat,
        dead_after=dead_after or config.dead_after,
    )
    try:
        async with DurableRuntime(config, listen=(queue,)), anyio.create_task_group() as tasks:
            tasks.start_soon(beats.run)
            if ready is not None:
                ready()
    finally:
        beats.close()
