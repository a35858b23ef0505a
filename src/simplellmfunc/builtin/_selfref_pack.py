"""The SelfReference primitive pack: what kernel code reaches through the PyRepl bridge.

Installed under the namespace ``selfref``. Kernel code sees it twice:

* ``self_reference.memory["<key>"].<method>(...)`` → primitives ``memory[].<method>`` (the memory
  handle API of :class:`~._selfref_memory.MemoryHandle`);
* ``runtime.selfref.context.inspect() / remember(text) / forget(experience_id) / compact(...)``.

The ``context`` primitives act on the key of the most recently started ``@llm_chat`` turn that
is still running (the agent whose tool call is executing), or on ``key=`` when given. Store work
runs in a worker thread (SQLite commits fsync). Forks are not implemented yet.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ._bridge_pack import PrimitivePack

if TYPE_CHECKING:
    from ._selfref import SelfReference

__all__ = ["NAMESPACE", "selfref_pack"]

NAMESPACE = "selfref"

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


def _memory_primitive(owner: SelfReference, method: str) -> Callable[..., Any]:
    async def call(key: str, *args: Any, **kwargs: Any) -> Any:
        handle = owner.memory[key]
        return await anyio.to_thread.run_sync(partial(getattr(handle, method), *args, **kwargs))

    call.__name__ = method
    return call


def selfref_pack(owner: SelfReference) -> PrimitivePack:
    """Build the ``selfref`` primitive pack for ``owner`` (its ``backend``)."""
    pack = PrimitivePack(
        NAMESPACE,
        description="SelfReference memory: history, experiences, compaction",
        backend=owner,
    )
    for method, contract in _MEMORY_METHODS.items():
        pack.add(f"memory[].{method}", _memory_primitive(owner, method), contract=contract)

    async def inspect(key: str | None = None) -> dict[str, Any]:
        """Overview of your memory: message counts by role, system prompt, experiences."""
        return await anyio.to_thread.run_sync(owner.inspect, owner.active_key(key))

    async def remember(text: str, key: str | None = None) -> dict[str, str]:
        """Store a durable fact shown under "## Experiences"; returns {"id", "text"}."""
        return await anyio.to_thread.run_sync(owner.remember, owner.active_key(key), text)

    async def forget(experience_id: str, key: str | None = None) -> bool:
        """Remove the experience with this id; returns whether it existed."""
        return await anyio.to_thread.run_sync(owner.forget, owner.active_key(key), experience_id)

    async def compact(
        goal: str,
        instruction: str = "",
        discoveries: list[str] | None = None,
        completed: list[str] | None = None,
        current_status: str = "",
        likely_next_work: str = "",
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
        target = owner.active_key(key)
        return await anyio.to_thread.run_sync(partial(owner.compact, target, **fields))

    for name, func in (
        ("inspect", inspect),
        ("remember", remember),
        ("forget", forget),
        ("compact", compact),
    ):
        pack.add(f"context.{name}", func)
    return pack
