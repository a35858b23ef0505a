"""Parked runs: a queued durable run waiting for a person gives its queue slot back.

A run taken from a queue that has waited ``park_after`` seconds for an approval (with no other
call of it still running) *parks*: it records a ``park`` step, notes itself in a small table of
the system database (``simplellmfunc_parked``: workflow id, queue, state), receives once more,
and, if no answer came, cancels itself through DBOS's public ``cancel_workflow``. A cancelled
run is not counted against its queue's concurrency, so a parked run holds neither a worker
thread nor a queue slot. The answer (:meth:`DurableHandle.answer`, :meth:`DurableClient.answer`)
is sent as a DBOS message as before; then whoever wins the row resumes the run on its queue
with ``resume_workflow(queue_name=...)``: DBOS executes it again, replaying every recorded step
(the park step too, which tells the new attempt not to park there again), and its receive gets
the answer.

Exactly one party resumes a parked run, decided by conditional updates of its row (one row
each, only one writer can win): the run, after cancelling itself, turns ``parking`` into
``parked`` (:meth:`ParkedRuns.settle`); an answer sent while the run was still ``parking``
turns it into ``answered``, and the run, finding that, resumes itself; an answer that finds
the run cancelled deletes the row and resumes it. An abort deletes the row first: nothing
resumes an aborted run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

import anyio
import sqlalchemy as sa

from ._config import sqlalchemy_url

__all__ = ["ParkedRuns", "current_parking", "outside_workflow", "use_parking"]

T = TypeVar("T")

_METADATA = sa.MetaData()
_PARKED = sa.Table(
    "simplellmfunc_parked",
    _METADATA,
    sa.Column("workflow_id", sa.String(200), primary_key=True),
    sa.Column("queue", sa.String(200), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # parking, parked or answered
    sa.Column("since", sa.Float, nullable=False),
)

_STORES: list[ParkedRuns] = []


class ParkedRuns:
    """The parked runs of one system database (the ``simplellmfunc_parked`` table).

    Args:
        url: The system database URL.
    """

    def __init__(self, url: str) -> None:
        self._engine = sa.create_engine(sqlalchemy_url(url), pool_size=2, max_overflow=0)
        self._created = False

    def close(self) -> None:
        """Close the database connections."""
        self._engine.dispose()

    async def parking(self, workflow_id: str, queue: str) -> None:
        """The run is about to park (it receives once more, then cancels itself)."""

        def write() -> None:
            with self._engine.begin() as connection:
                connection.execute(_PARKED.delete().where(_PARKED.c.workflow_id == workflow_id))
                connection.execute(
                    _PARKED.insert().values(
                        workflow_id=workflow_id, queue=queue, state="parking", since=time.time()
                    )
                )

        await self._run(write)

    async def settle(self, workflow_id: str) -> bool:
        """The run cancelled itself: whether it must resume itself now (an answer came while
        it was parking, and it won the row); ``False``: it is parked, or an answer's sender
        took the row and resumes it."""

        def write() -> bool:
            table = _PARKED.c
            with self._engine.begin() as connection:
                done = connection.execute(
                    _PARKED.update()
                    .where(table.workflow_id == workflow_id, table.state == "parking")
                    .values(state="parked")
                )
                if done.rowcount == 1:
                    return False
                taken = connection.execute(
                    _PARKED.delete().where(
                        table.workflow_id == workflow_id, table.state == "answered"
                    )
                )
                return bool(taken.rowcount == 1)

        return await self._run(write)

    async def answered(self, workflow_id: str, *, cancelled: bool) -> str | None:
        """An answer was sent to the run: the queue to resume it on, if this caller won it.

        ``cancelled`` is whether the run's status was read as cancelled after the answer was
        sent: then the row is taken whatever its state (the run may have died right after
        cancelling itself); otherwise a run still parking is told that an answer came.
        """

        def write() -> str | None:
            table = _PARKED.c
            with self._engine.begin() as connection:
                row = connection.execute(
                    sa.select(table.queue, table.state).where(table.workflow_id == workflow_id)
                ).first()
                if row is None:
                    return None
                queue, state = str(row[0]), str(row[1])
                if not cancelled:
                    connection.execute(
                        _PARKED.update()
                        .where(table.workflow_id == workflow_id, table.state == "parking")
                        .values(state="answered")
                    )
                    if state != "parked":
                        return None
                taken = connection.execute(
                    _PARKED.delete().where(table.workflow_id == workflow_id, table.state == state)
                )
                return queue if taken.rowcount == 1 else None

        return await self._run(write)

    async def is_parked(self, workflow_id: str) -> bool:
        """Whether the run is parked (or parking): cancelled to wait, not aborted."""

        def read() -> bool:
            with self._engine.connect() as connection:
                row = connection.execute(
                    sa.select(_PARKED.c.state).where(_PARKED.c.workflow_id == workflow_id)
                ).first()
            return row is not None

        return await self._run(read)

    async def forget(self, workflow_id: str) -> None:
        """Drop the run's row: it is no longer resumed by an answer (an abort, an answer
        received before the run parked)."""

        def write() -> None:
            with self._engine.begin() as connection:
                connection.execute(_PARKED.delete().where(_PARKED.c.workflow_id == workflow_id))

        await self._run(write)

    async def _run(self, func: Callable[[], T]) -> T:
        if not self._created:
            await anyio.to_thread.run_sync(_METADATA.create_all, self._engine)
            self._created = True
        return await anyio.to_thread.run_sync(func)


def use_parking(store: ParkedRuns | None) -> None:
    """Make ``store`` this process's parked runs (the launched runtime's), or none."""
    _STORES.clear()
    if store is not None:
        _STORES.append(store)


def current_parking() -> ParkedRuns | None:
    """This process's parked runs (``None`` without a launched runtime)."""
    return _STORES[0] if _STORES else None


async def outside_workflow(func: Callable[[], T]) -> T:
    """Run ``func`` in a worker thread where DBOS sees no workflow: a DBOS call made there is
    not recorded as a step of the run (``run_in_executor`` copies no context variables)."""
    return await asyncio.get_running_loop().run_in_executor(None, func)
