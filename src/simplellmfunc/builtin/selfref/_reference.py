"""SelfReference: durable, agent-editable memory per key (history, experiences, summaries), bound
to ``@llm_chat`` turns by a run hook and to PyRepl kernels by a primitive pack.

The class is the top of the package: a :class:`~._bank.MemoryBank` (state, store, pending edits)
plus the parts that use it — ``memory[...]`` handles (``_handle``), the run hook (``_hook``, which
runs forks through ``_forks``) and the kernel primitives (``_primitives``). Those parts know the
bank only, so nothing imports this module back. They are imported on first use: the hook, the
turn and the primitives pull in the engine, which a script that only reads or edits memory does
not need.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...exceptions import ArgumentValueError, UnboundKeyError
from ._bank import MemoryBank, check_fork_limits
from ._handle import MemoryMap
from ._instance import InstanceForks, InstanceHandle
from ._store import MemoryStateStore, SQLiteStateStore, StateStore

if TYPE_CHECKING:
    from ...engine import RunHook
    from ..pyrepl import PrimitivePack

__all__ = ["SelfReference"]


class SelfReference(MemoryBank):
    """Agent memory keyed by name: history, experiences, summary checkpoints, fork handles.

    Args:
        path: A SQLite file to persist to (created if missing); ``None`` keeps state in memory.
        store: An explicit store (overrides ``path``).
        max_fork_depth: How deep forks may nest (a root agent is depth 0, its forks depth 1);
            a spawn beyond it is refused.
        max_concurrent_forks: Forks of one turn that run at once; further spawns are queued.

    Raises:
        ConfigError: If the database cannot be opened.
        UserError: For a negative depth or a concurrency below 1.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        store: StateStore | None = None,
        max_fork_depth: int = 2,
        max_concurrent_forks: int = 4,
    ) -> None:
        check_fork_limits(max_fork_depth, max_concurrent_forks)  # before a database is opened
        if store is None:
            store = SQLiteStateStore(path) if path is not None else MemoryStateStore()
        super().__init__(
            store, max_fork_depth=max_fork_depth, max_concurrent_forks=max_concurrent_forks
        )
        self.memory = MemoryMap(self)
        self._instance = InstanceForks(self)

    @property
    def instance(self) -> InstanceHandle:
        """The bound agent and forks of it from Python (SimpleLLMFunc's API): ``fork(...)``,
        ``fork_spawn(...)``, ``fork_gather_all(...)``; see :meth:`bind_agent_instance`."""
        return InstanceHandle(self._instance)

    def bind_agent_instance(
        self, agent_instance: Callable[..., Any], default_memory_key: str | None = None
    ) -> None:
        """Bind the agent that ``instance.fork(...)`` calls (and that
        ``runtime.selfref.fork.spawn`` calls from a kernel cell outside an ``@llm_chat``
        turn), and the key forks start from when none is given.

        Raises:
            ArgumentValueError: If ``agent_instance`` is not callable (a ``ValueError``).
        """
        self._instance.bind(agent_instance, default_memory_key)

    def get_agent_instance(self) -> Callable[..., Any] | None:
        """The bound agent, if any."""
        return self._instance.agent

    def resolve_history_key(self, key: str | None = None) -> str:
        """The key memory operations act on (SimpleLLMFunc's resolution): ``key`` when given;
        else the key of the running turn or fork in this context, the bound agent's default
        key (bound empty when missing), or the only key there is.

        Raises:
            UnboundKeyError: If ``key`` is given but not bound (a ``KeyError``).
            ArgumentValueError: If no key is given and none can be chosen (a ``ValueError``).
        """
        bound = set(self.keys())
        if key is not None:
            if key not in bound:
                raise UnboundKeyError(f"memory key {key!r} is not bound")
            return key
        from ._turn import current_turn

        turn = current_turn(self)
        running = turn.key if turn is not None else self._instance.active_key()
        if running is not None:
            return running
        default = self._instance.default_key
        if default is not None:
            if default not in bound:
                self.bind_history(default, [])
            return default
        if len(bound) == 1:
            return next(iter(bound))
        what = "no memory key is bound" if not bound else "several memory keys are bound"
        raise ArgumentValueError(f"history key is required: {what}")

    def list_history_keys(self) -> list[str]:
        """:meth:`keys` under SimpleLLMFunc's name."""
        return self.keys()

    def has_history(self, key: str) -> bool:
        """Whether ``key`` has stored state."""
        return key in self.keys()

    def run_hook(self, key: str) -> RunHook:
        """Return the run hook binding an ``@llm_chat`` turn to ``key``."""
        from ._hook import SelfReferenceHook

        return SelfReferenceHook(self, key)

    def as_primitive_pack(self) -> PrimitivePack:
        """The ``selfref`` primitive pack that exposes this memory inside a PyRepl kernel."""
        from ._primitives import selfref_pack

        return selfref_pack(self, backend=self, instance=self._instance)

    def active_key(self, key: str | None = None) -> str:
        """``key``, or the key of the turn whose tool call is running in this context (else the
        most recently started turn that is still running).

        Raises:
            UserError: If no key is given and no bound turn is running.
        """
        from ._turn import active_key

        return active_key(self, key)

    def snapshot_history(self, key: str) -> list[dict[str, Any]]:
        """:meth:`get_history` under SimpleLLMFunc's name."""
        return self.get_history(key)

    def commit_pending_compaction(self, key: str) -> None:
        """Nothing to do, kept for SimpleLLMFunc code: ``compact`` applies at once here (its
        result's ``status`` is ``"applied"``), so no compaction is ever pending."""
        del key

    def __repr__(self) -> str:
        return f"SelfReference(store={type(self._store).__name__})"
