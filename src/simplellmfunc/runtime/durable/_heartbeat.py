"""Worker liveness: each worker process beats in a small table of the system database, and a
live worker puts the unfinished sessions of a dead one back on their queue.

DBOS resumes a process's unfinished runs when a process with the same executor id launches
again; without a supervisor that restarts it, a SIGKILLed worker's sessions would wait. So each
worker records ``(executor_id, queue, seen_at)`` every ``interval`` seconds, and one that sees
another's beat older than ``dead_after`` claims it (a conditional delete only one worker can
win) and re-enqueues that executor's pending sessions: another worker resumes each from its
last recorded step.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import sqlalchemy as sa
from dbos import DBOS

from ._config import sqlalchemy_url
from ._workflow import WORKFLOW_NAME

__all__ = ["Heartbeat"]

_METADATA = sa.MetaData()
_WORKERS = sa.Table(
    "simplellmfunc_workers",
    _METADATA,
    sa.Column("executor_id", sa.String(200), primary_key=True),
    sa.Column("queue", sa.String(200), nullable=False),
    sa.Column("seen_at", sa.Float, nullable=False),
)


@dataclass(frozen=True, slots=True)
class _Beat:
    executor_id: str
    queue: str
    seen_at: float


class Heartbeat:
    """The liveness record of one worker, and the takeover of dead workers' sessions.

    Args:
        url: The system database URL.
        executor_id: This worker's executor id.
        queue: The queue it consumes.
        interval: Seconds between beats.
        dead_after: A worker whose last beat is older than this is dead.
    """

    def __init__(
        self, url: str, executor_id: str, queue: str, *, interval: float, dead_after: float
    ) -> None:
        self._engine = sa.create_engine(sqlalchemy_url(url), pool_size=2, max_overflow=0)
        self.executor_id = executor_id
        self.queue = queue
        self.interval = interval
        self.dead_after = dead_after
        self.taken_over: list[str] = []

    async def run(self) -> None:
        """Beat and take over, until cancelled (then the beat says "gone")."""
        await anyio.to_thread.run_sync(self._create)
        try:
            while True:
                dead = await anyio.to_thread.run_sync(self._beat)
                for beat in dead:
                    await self._take_over(beat)
                await anyio.sleep(self.interval)
        finally:
            with anyio.CancelScope(shield=True):
                # A clean stop: live workers take this one's unfinished sessions at once.
                await anyio.to_thread.run_sync(self._leave)

    def close(self) -> None:
        """Close the database connections."""
        self._engine.dispose()

    def _create(self) -> None:
        _METADATA.create_all(self._engine, checkfirst=True)

    def _beat(self) -> Sequence[_Beat]:
        """Record this worker's beat; return the beats of dead workers this one claimed."""
        now = time.time()
        with self._engine.begin() as connection:
            connection.execute(_WORKERS.delete().where(_WORKERS.c.executor_id == self.executor_id))
            connection.execute(
                _WORKERS.insert().values(
                    executor_id=self.executor_id, queue=self.queue, seen_at=now
                )
            )
        with self._engine.connect() as connection:
            rows = connection.execute(
                sa.select(_WORKERS).where(_WORKERS.c.seen_at < now - self.dead_after)
            ).all()
        return [beat for beat in (_Beat(*row) for row in rows) if self._claim(beat)]

    def _claim(self, beat: _Beat) -> bool:
        """Delete the dead worker's beat if it is unchanged: only one live worker wins it."""
        with self._engine.begin() as connection:
            deleted = connection.execute(
                _WORKERS.delete().where(
                    _WORKERS.c.executor_id == beat.executor_id,
                    _WORKERS.c.seen_at == beat.seen_at,
                )
            )
        return deleted.rowcount == 1

    def _leave(self) -> None:
        with self._engine.begin() as connection:
            connection.execute(
                _WORKERS.update()
                .where(_WORKERS.c.executor_id == self.executor_id)
                .values(seen_at=0.0)
            )

    async def _take_over(self, beat: _Beat) -> None:
        pending = await DBOS.list_workflows_async(
            status="PENDING",
            executor_id=beat.executor_id,
            name=WORKFLOW_NAME,
            load_input=False,
            load_output=False,
        )
        for workflow in pending:
            await DBOS.resume_workflow_async(
                workflow.workflow_id, queue_name=workflow.queue_name or beat.queue
            )
            self.taken_over.append(workflow.workflow_id)
