"""The SelfReference primitive pack: what kernel code reaches through the PyRepl bridge.

Installed under the namespace ``selfref``. Kernel code sees it twice:

* ``self_reference.memory["<key>"].<method>(...)`` → primitives ``memory[].<method>`` (the memory
  handle API of :class:`~._handle.MemoryHandle`);
* ``runtime.selfref.context.inspect() / remember(text) / forget(experience_id) / compact(...)``;
* ``runtime.selfref.fork.spawn(task, instruction) / gather_all(include_history=False)``: child
  agents of the running turn (see ``_forks``).

The ``context`` primitives act on the key of the ``@llm_chat`` turn whose tool call is executing
(else the most recently started turn that is still running), or on ``key=`` when given. Store
work runs in a worker thread (SQLite commits fsync).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import anyio.to_thread

from ..pyrepl import PrimitivePack
from ._bank import MemoryBank
from ._handle import MemoryMap
from ._instance import InstanceForks, cell_emitter
from ._turn import active_key, active_turn, current_turn

__all__ = ["NAMESPACE", "selfref_pack"]

NAMESPACE = "selfref"
# gather_all waits for child agents; the execution's own time limit usually ends it first.
_GATHER_TIMEOUT = 3600.0

_MEMORY_METHODS: dict[str, str] = {
    "count": "count() -> int: number of stored messages",
    "all": "all() -> list[dict]: copies of every stored message",
    "get": "get(index) -> dict: a copy of one message",
    "append": "append(message) -> int: append a chat dict; returns the new count",
    "insert": "insert(index, message) -> int: insert a chat dict before index",
    "update": "update(index, message) -> int: replace the message at index",
    "delete": "delete(index) -> int: remove the message at index",
    "replace": "replace(messages) -> int: replace the whole history (validated)",
    "clear": "clear() -> int: remove every message",
    "get_system_prompt": "get_system_prompt() -> str | None: the stored system prompt",
    "set_system_prompt": "set_system_prompt(text) -> str: overwrite the system prompt",
    "append_system_prompt": "append_system_prompt(text) -> str: add a line to the system prompt",
}


def _memory_primitive(memory: MemoryMap, method: str) -> Callable[..., Any]:
    async def call(key: str, *args: Any, **kwargs: Any) -> Any:
        handle = memory[key]
        return await anyio.to_thread.run_sync(partial(getattr(handle, method), *args, **kwargs))

    call.__name__ = method
    return call


def selfref_pack(
    bank: MemoryBank, *, backend: object, instance: InstanceForks | None = None
) -> PrimitivePack:
    """Build the ``selfref`` primitive pack over ``bank``.

    Args:
        bank: The memory the primitives act on.
        backend: What ``PyRepl.get_runtime_backend("selfref")`` returns (the SelfReference).
        instance: The bound agent's forks (what ``fork.*`` uses outside an ``@llm_chat`` turn).
    """
    pack = PrimitivePack(
        NAMESPACE,
        description="SelfReference memory: history, experiences, compaction, forks",
        backend=backend,
    )
    memory = MemoryMap(bank)
    for method, contract in _MEMORY_METHODS.items():
        pack.add(f"memory[].{method}", _memory_primitive(memory, method), contract=contract)

    async def inspect(key: str | None = None) -> dict[str, Any]:
        """Overview of your memory: message counts by role, system prompt, experiences."""
        return await anyio.to_thread.run_sync(bank.inspect, active_key(bank, key))

    async def remember(text: str, key: str | None = None) -> dict[str, str]:
        """Store a durable fact shown under "## Experiences"; returns {"id", "text"}."""
        return await anyio.to_thread.run_sync(bank.remember, active_key(bank, key), text)

    async def forget(experience_id: str, key: str | None = None) -> bool:
        """Remove the experience with this id; returns whether it existed."""
        return await anyio.to_thread.run_sync(bank.forget, active_key(bank, key), experience_id)

    async def compact(
        goal: str,
        instruction: str = "",
        discoveries: list[str] | None = None,
        completed: list[str] | None = None,
        current_status: str = "",
        likely_next_work: str | list[str] = "",
        relevant_files_directories: list[str] | None = None,
        remember: list[str] | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Replace the conversation with this summary (the system prompt stays)."""
        fields = {
            "goal": goal,
            "instruction": instruction,
            "discoveries": discoveries,
            "completed": completed,
            "current_status": current_status,
            "likely_next_work": likely_next_work,
            "relevant_files_directories": relevant_files_directories,
            "remember": remember,
        }
        target = active_key(bank, key)
        return await anyio.to_thread.run_sync(partial(bank.compact, target, **fields))

    for name, func in (
        ("inspect", inspect),
        ("remember", remember),
        ("forget", forget),
        ("compact", compact),
    ):
        pack.add(f"context.{name}", func)
    _add_fork_primitives(pack, bank, instance)
    return pack


def _add_fork_primitives(
    pack: PrimitivePack, bank: MemoryBank, instance: InstanceForks | None
) -> None:
    def bound() -> InstanceForks | None:
        """The bound agent's forks, when no turn is running here and an agent is bound."""
        if current_turn(bank) is None and instance is not None and instance.agent is not None:
            return instance
        return None

    async def spawn(task: str, instruction: str = "", **agent_kwargs: Any) -> dict[str, Any]:
        """Start a fork: a child agent that sees your conversation up to this tool call plus
        the task, and runs concurrently with its own fresh REPL; returns {"fork_id",
        "memory_key", "depth", "status"} (status "running", or "queued" at the concurrency
        limit). Outside an @llm_chat turn it calls the agent bound with
        bind_agent_instance (keyword arguments go to it; source_memory_key= /
        fork_memory_key= choose the keys) and lives as long as this cell."""
        if "include_history" in agent_kwargs:
            raise TypeError(
                "fork.spawn does not accept include_history; "
                "call fork.gather_all(..., include_history=True) instead"
            )
        forks = bound()
        if forks is None:
            if agent_kwargs:
                raise TypeError(f"fork.spawn got unexpected arguments: {sorted(agent_kwargs)}")
            return await active_turn(bank).forks.spawn(task, instruction)
        text = f"{task}\n\n{instruction}" if instruction else task
        source = agent_kwargs.pop("source_memory_key", None)
        target = agent_kwargs.pop("fork_memory_key", None)
        return await forks.spawn(
            (text,), agent_kwargs, source=source, target=target, emitter=cell_emitter()
        )

    async def gather_all(
        fork_ids: Any = None, include_history: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Wait for the forks (fork_ids: an id, a handle or a list of them; default: every fork
        of this turn); returns {fork_id: {"status", "response", "result", "error", "usage",
        "history_count", "history_included", ...}} with status completed, failed or cancelled
        ("result" is the reply parsed as JSON when it is JSON, else the reply). If the execution
        times out while waiting, the forks keep running: call gather_all again."""
        if isinstance(fork_ids, bool):  # gather_all(True): the include_history of before
            fork_ids, include_history = None, fork_ids
        forks = bound()
        if forks is not None:
            return await forks.gather(fork_ids, include_history)
        return await active_turn(bank).forks.gather_all(include_history, fork_ids)

    pack.add("fork.spawn", spawn)
    pack.add("fork.gather_all", gather_all, timeout=_GATHER_TIMEOUT)
