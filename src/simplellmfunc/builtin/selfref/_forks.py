"""SelfReference forks: child agents that run beside their parent's turn.

``runtime.selfref.fork.spawn(task, instruction)`` starts a child (built and run by ``_child``)
in the task group of the parent's run; ``runtime.selfref.fork.gather_all()`` waits for every
child of the turn and returns ``{fork_id: result}``.

Limits (set on :class:`~._reference.SelfReference`): ``max_fork_depth`` (default 2: a root agent's
forks may fork once more) — a spawn beyond it is refused with a ``UserError``;
``max_concurrent_forks`` per turn (default 4) — extra spawns are accepted and *queued*
(``status: "queued"``), each starting when a running fork of the turn ends.

Lifecycle: a fork ends ``completed`` (it answered), ``failed`` (its run raised, e.g. the model
API failed; ``error`` says why) or ``cancelled`` (the parent was aborted — the child's abort
signal is linked to the parent's — or the parent's turn ended before the fork finished). A
failing fork never fails or hangs its parent. When a fork ends, its kernels are closed, its
usage is added to the parent's run total (``ReactEndEvent.total_usage``), its handle in the
parent key is updated, and a ``selfref_fork_end`` custom event is sent (``selfref_fork_spawned``
when it is spawned, ``selfref_fork_start`` when it starts running). The parent's turn cancels
and waits for its running forks when it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread

from ..._events import CustomEvent
from ...engine import RunHook
from ...exceptions import UnboundKeyError, UserError
from ._bank import MemoryBank
from ._child import Fork, ForkStatus, ParentRun, fork_id_list, fork_prompt, run_fork

__all__ = ["ForkManager"]

_CLOSE_SECONDS = 30.0  # how long a turn that ends waits for its cancelled forks to wind down
_CLEANUP_SECONDS = 15.0  # bound on closing one fork's kernels and storing its handle


class ForkManager:
    """The forks of one running turn.

    Args:
        bank: The memory bank (fork limits, fork handles, the children's keys).
        key: The memory key of the turn.
        parent: The turn's run.
        child_hooks: The run hooks of a child with memory key ``key`` (the parent's, with its
            SelfReference hook replaced by one for the child's key).
    """

    def __init__(
        self,
        bank: MemoryBank,
        key: str,
        parent: ParentRun,
        child_hooks: Callable[[str], tuple[RunHook, ...]],
    ) -> None:
        self._bank = bank
        self._key = key
        self._parent = parent
        self._child_hooks = child_hooks
        self._limit = bank.max_concurrent_forks
        self._limiter = anyio.CapacityLimiter(self._limit)
        self._forks: dict[str, Fork] = {}
        self._closed = False

    async def spawn(self, task: str, instruction: str = "") -> dict[str, Any]:
        """Start a child agent on ``task``; returns ``{fork_id, memory_key, depth, status}``.

        Raises:
            UserError: For an empty task, beyond the depth limit, after the turn ended, or when
                the run has no task group.
        """
        self._check(task, instruction)
        parent = self._parent
        fork_id, key = await anyio.to_thread.run_sync(
            self._bank.open_fork, self._key, parent.fork_id, task
        )
        prompt = fork_prompt(task, instruction, fork_id, parent.depth + 1)
        fork = parent.child(fork_id, key, task, prompt, self._child_hooks(key))
        waiting = sum(not f.done.is_set() for f in self._forks.values())
        status: ForkStatus = "running" if waiting < self._limit else "queued"
        self._forks[fork.fork_id] = fork
        parent.start_soon(self._run, fork, status, name=f"selfref fork {fork.fork_id}")
        return {
            "fork_id": fork.fork_id,
            "memory_key": fork.key,
            "depth": fork.depth,
            "status": status,
        }

    async def gather_all(
        self, include_history: bool = False, fork_ids: Any = None
    ) -> dict[str, dict[str, Any]]:
        """Wait for the forks ``fork_ids`` (an id, a handle or a list of them; default: every
        fork of the turn); return ``{fork_id: result}`` (see ``Fork.report``).

        Raises:
            UnboundKeyError: For a fork id that is not a fork of this turn.
        """
        forks = list(self._forks.values())
        if fork_ids is not None:
            ids = fork_id_list(fork_ids)
            missing = [i for i in ids if i not in self._forks]
            if missing:
                raise UnboundKeyError(f"fork_id {missing[0]!r} is not a fork of this turn")
            forks = [self._forks[i] for i in ids]
        for fork in forks:
            await fork.done.wait()
        return {fork.fork_id: fork.report(include_history) for fork in forks}

    async def close(self) -> None:
        """Cancel the forks still running and wait (bounded, shielded) until they wound down."""
        self._closed = True
        running = [f for f in self._forks.values() if not f.done.is_set()]
        for fork in running:
            fork.scope.cancel()
        with anyio.move_on_after(_CLOSE_SECONDS, shield=True):
            for fork in running:
                await fork.done.wait()

    # -- internals ---------------------------------------------------------------------------

    def _check(self, task: str, instruction: str) -> None:
        if not isinstance(task, str) or not task.strip():
            raise UserError("fork.spawn needs a non-empty task")
        if not isinstance(instruction, str):
            raise UserError("fork.spawn: instruction must be a string")
        if self._closed:
            raise UserError("this turn has ended: it cannot spawn forks any more")
        depth, limit = self._parent.depth, self._bank.max_fork_depth
        if depth + 1 > limit:
            raise UserError(
                f"fork depth limit reached: this agent is at fork depth {depth} and "
                f"max_fork_depth is {limit}; do this task yourself"
            )
        self._parent.context()  # raises when the run has no task group

    async def _run(self, fork: Fork, status: str) -> None:
        try:
            with fork.scope:
                # Sent from the child's task, so it comes before the child's own events.
                info = {"fork_id": fork.fork_id, "memory_key": fork.key, "depth": fork.depth}
                spawned = {**info, "task": fork.task, "status": status}
                await fork.emit(CustomEvent("selfref_fork_spawned", spawned))
                async with self._limiter:
                    fork.status = "running"
                    await fork.emit(
                        CustomEvent("selfref_fork_start", {**info, "status": "running"})
                    )
                    await run_fork(fork)
        finally:
            await self._finish(fork)
        end = {"fork_id": fork.fork_id, "status": fork.status, "error": fork.error}
        await fork.emit(CustomEvent("selfref_fork_end", {**end, "usage": fork.usage.to_dict()}))

    async def _finish(self, fork: Fork) -> None:
        """Settle the outcome, close the kernels, count the usage; runs even when cancelled."""
        with anyio.CancelScope(shield=True):
            if fork.status in ("queued", "running"):
                fork.status = "cancelled"
                fork.error = fork.error or "cancelled: the parent turn ended before this fork did"
            fork.unlink()
            self._parent.add_usage(fork.usage)
            with anyio.move_on_after(_CLEANUP_SECONDS):
                for repl in fork.repls:
                    await repl.aclose()
                await anyio.to_thread.run_sync(
                    self._bank.close_fork, self._key, fork.fork_id, fork.handle()
                )
            fork.done.set()
