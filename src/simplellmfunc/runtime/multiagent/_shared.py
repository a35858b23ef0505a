"""SharedMemory: a key-value memory several agents read and write (seed 001 §17.2).

It sits on any :class:`~simplellmfunc.runtime.stores.Store`: an :class:`InMemoryStore` (this
process) by default, a :class:`RedisStore` to share it between processes, with the same
interface. Namespaces keep teams or topics apart; ``append_only`` forbids overwriting a key.
:meth:`SharedMemory.tools` gives agents ``shared_read`` / ``shared_write`` / ``shared_keys``.
"""

from __future__ import annotations

from typing import Any

from ...exceptions import UserError
from ...tools import Tool
from ..stores import InMemoryStore, Namespace, Store

__all__ = ["SharedMemory"]

_AGENT = "shared-memory"


class SharedMemory:
    """Values under string keys, shared by agents (and processes, on a shared store).

    Args:
        store: Where the values live (default: a new in-process store).
        namespace: The namespace of this view (``[A-Za-z0-9_.-]``).
        append_only: Refuse to overwrite or delete a key once written.
    """

    def __init__(
        self, store: Store | None = None, *, namespace: str = "default", append_only: bool = False
    ) -> None:
        self.store = store if store is not None else InMemoryStore()
        self.namespace_name = namespace
        self.append_only = append_only
        self._ns = Namespace(_AGENT, namespace)

    def namespace(self, name: str) -> SharedMemory:
        """A view of namespace ``name`` on the same store."""
        return SharedMemory(self.store, namespace=name, append_only=self.append_only)

    async def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (``default`` when it has none)."""
        item = await self.store.get(self._ns, key)
        return default if item is None else item.value

    async def set(self, key: str, value: Any) -> None:
        """Write ``value`` (a JSON value) under ``key``.

        Raises:
            UserError: If the memory is append-only and ``key`` is written already.
        """
        if self.append_only and await self.store.get(self._ns, key) is not None:
            raise UserError(f"shared memory {self.namespace_name!r} is append-only: {key!r} exists")
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
