"""SharedMemory: a key-value memory several agents read and write (seed 001 §17.2).

It sits on any :class:`~simplellmfunc.runtime.stores.Store`: an :class:`InMemoryStore` (this
process) by default, a :class:`RedisStore` to share it between processes, with the same
interface. Namespaces keep teams or topics apart. ``append_only`` is the seed's preservation
rule (Σ' ⊇ Σ): no key is ever deleted, and a key keeps the JSON type of its first value. The type
is registered with :meth:`Store.add` (one atomic set-if-absent, also across processes on Redis),
so of concurrent writers of one key with different types exactly one wins and the others get
:class:`~simplellmfunc.exceptions.SharedMemoryTypeError`.
:meth:`SharedMemory.tools` gives agents ``shared_read`` / ``shared_write`` / ``shared_keys``;
:meth:`SharedMemory.wrap` runs an agent with the memory in its context (the seed's
``sm.wrap(agent)``: a ``## Shared Memory`` section of its system message, kept current before
every LLM call).
"""

from __future__ import annotations

from typing import Any

from ...decorators import ChatAgent
from ...exceptions import SharedMemoryTypeError, UserError
from ...tools import Tool
from ..memory import MemoryHook
from ..stores import InMemoryStore, Namespace, Store

__all__ = ["SharedMemory"]

_AGENT = "shared-memory"
_HEADING = "## Shared Memory"
_TYPES = "shared-memory-types"  # the first JSON type of each key of an append-only memory


def json_kind(value: object) -> str:
    """The JSON type of ``value``: null, boolean, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    return "object"


class SharedMemory:
    """Values under string keys, shared by agents (and processes, on a shared store).

    Args:
        store: Where the values live (default: a new in-process store).
        namespace: The namespace of this view (``[A-Za-z0-9_.-]``).
        append_only: Keep every key (no delete) with the JSON type of its first value: an
            overwrite with a value of the same type is allowed, a change of type is refused.
    """

    def __init__(
        self, store: Store | None = None, *, namespace: str = "default", append_only: bool = False
    ) -> None:
        self.store = store if store is not None else InMemoryStore()
        self.namespace_name = namespace
        self.append_only = append_only
        self._ns = Namespace(_AGENT, namespace)
        self._types = Namespace(_TYPES, namespace)

    def namespace(self, name: str) -> SharedMemory:
        """A view of namespace ``name`` on the same store."""
        return SharedMemory(self.store, namespace=name, append_only=self.append_only)

    async def get(self, key: str, default: object = None) -> Any:
        """The value of ``key`` (``default`` when it has none)."""
        item = await self.store.get(self._ns, key)
        return default if item is None else item.value

    async def set(self, key: str, value: object) -> None:
        """Write ``value`` (a JSON value) under ``key``.

        Raises:
            SharedMemoryTypeError: If the memory is append-only and ``key`` holds a value of
                another JSON type (also when another writer registered it a moment before).
            UserError: For an invalid key or a value JSON cannot carry.
        """
        if self.append_only:
            kind = json_kind(value)
            # A key written before the memory became append-only keeps the type it has.
            there = await self.store.get(self._ns, key)
            claim = kind if there is None else json_kind(there.value)
            first = await self.store.add(self._types, key, claim, ttl=None)
            registered = claim if first is None else first.value
            if registered != kind:
                raise SharedMemoryTypeError(
                    f"shared memory {self.namespace_name!r} is append-only: {key!r} holds a "
                    f"{registered}, not a {kind}"
                )
        await self.store.set(self._ns, key, value)

    async def delete(self, key: str) -> bool:
        """Delete ``key``; whether it existed.

        Raises:
            UserError: If the memory is append-only.
        """
        if self.append_only:
            raise UserError(f"shared memory {self.namespace_name!r} is append-only")
        return await self.store.delete(self._ns, key)

    async def keys(self) -> list[str]:
        """Every key of the namespace."""
        return await self.store.keys(self._ns)

    async def snapshot(self) -> dict[str, Any]:
        """Every key and value of the namespace."""
        return {item.key: item.value for item in await self.store.items(self._ns)}

    def wrap(self, agent: ChatAgent, *, recent: int = 20) -> ChatAgent:
        """``agent`` running with this memory in its context: before every LLM call its system
        message gets a ``## Shared Memory`` section with the ``recent`` newest keys and values
        (give it :meth:`tools` too, to change them).

        Raises:
            UserError: If ``agent`` is not an ``@llm_chat`` agent.
        """
        if not isinstance(agent, ChatAgent):
            raise UserError(f"SharedMemory.wrap needs an @llm_chat agent, got {agent!r}")
        hook = MemoryHook(
            self.store.scope(_AGENT, self.namespace_name),
            recent=recent,
            auto_save=(),
            save_turns=False,
            heading=_HEADING,
            intro=f"What the team shares (namespace {self.namespace_name!r}), newest first:",
        )
        return agent.with_hooks(hook)

    def tools(self) -> tuple[Tool, Tool, Tool]:
        """``shared_read``, ``shared_write`` and ``shared_keys`` over this namespace."""
        memory = self

        async def shared_read(key: str) -> Any:
            """Read a value from the team's shared memory.

            Args:
                key: The key.
            """
            value = await memory.get(key)
            return value if value is not None else f"(nothing under {key!r})"

        async def shared_write(key: str, value: str) -> str:
            """Write a value to the team's shared memory, for the other agents.

            Args:
                key: The key.
                value: The value.
            """
            await memory.set(key, value)
            return f"saved {key!r}"

        async def shared_keys() -> list[str]:
            """List the keys of the team's shared memory."""
            return await memory.keys()

        return (Tool(func=shared_read), Tool(func=shared_write), Tool(func=shared_keys))
