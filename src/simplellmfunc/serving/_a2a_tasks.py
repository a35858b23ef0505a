"""What an A2A server's shutdown waits for: the SDK's wind-down of the tasks that ended.

The SDK (``a2a-sdk``) runs each task in background tasks of its own (a producer that calls our
executor, a consumer that applies its updates and saves the task, queue dispatchers) that outlive
the request. Once a task has ended, they wind down over a few loop turns; forcing them in the
middle of it (the handler's ``aclose``) makes the SDK warn that events may be lost. A task left
``input-required`` keeps them until they are forced.

:class:`WindDown` is our own bookkeeping of that, from two public seams: the executor says when
it enqueues a task's final update (:meth:`WindDown.expect`), and the task store
(:class:`WatchedTaskStore`, the SDK's in-memory one) sees the SDK save the final state, in the
asyncio task that winds the SDK's task down (its consumer, which ends after its producer). A
shutdown waits until every final update expected was saved and every such saver has returned
(:meth:`WindDown.settle`).
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Task, TaskState

__all__ = ["FINAL_STATES", "WatchedTaskStore", "WindDown"]

#: The states a task does not leave (the protocol's terminal states).
FINAL_STATES: frozenset[int] = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)


class WindDown:
    """Which ended tasks the SDK has not finished with yet (see the module's docstring)."""

    def __init__(self) -> None:
        self._expected: set[str] = set()  # final update enqueued, its save not seen yet
        self._winding: dict[str, asyncio.Task[Any]] = {}  # final state saved in a live task
        self._changed = anyio.Event()  # set at each change (and made anew by settle)

    @property
    def settled(self) -> bool:
        """Whether every final update expected was saved, and each saver has returned."""
        return not self._expected and not self._winding

    async def settle(self) -> None:
        """Wait until :attr:`settled`."""
        while not self.settled:
            self._changed = anyio.Event()
            await self._changed.wait()

    def expect(self, task_id: str) -> None:
        """The executor is about to enqueue ``task_id``'s final update."""
        self._expected.add(task_id)

    def dropped(self, task_id: str) -> None:
        """The final update of ``task_id`` was not enqueued after all."""
        self._expected.discard(task_id)
        self._changed.set()

    def saved(self, task: Task) -> None:
        """The SDK saves ``task``, in the current asyncio task."""
        if task.status.state not in FINAL_STATES:
            return
        self._expected.discard(task.id)
        self._changed.set()
        saver = asyncio.current_task()
        if saver is None or saver.done():
            return
        self._winding[task.id] = saver
        saver.add_done_callback(partial(self._returned, task.id))

    def _returned(self, task_id: str, saver: asyncio.Task[Any]) -> None:
        if self._winding.get(task_id) is saver:
            del self._winding[task_id]
            self._changed.set()


class WatchedTaskStore(InMemoryTaskStore):
    """The SDK's in-memory task store, telling a :class:`WindDown` of every save."""

    def __init__(self, wind_down: WindDown) -> None:
        super().__init__()
        self._wind_down = wind_down

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        self._wind_down.saved(task)
