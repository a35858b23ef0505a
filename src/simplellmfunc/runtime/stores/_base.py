"""The store interface shared by everything the runtime keeps (memory, SQLite, Redis stores).

A :class:`Store` holds JSON values under string keys, inside a :class:`Namespace` (agent +
session). Semantics, identical for every implementation (the tests run each rule on all three):

* **TTL**: an item written with ``ttl`` seconds expires ``ttl`` seconds after the write, measured
  on the store's ``clock`` (``time.time`` unless a test passes its own). An expired item is
  invisible at once and removed lazily. ``ttl=None`` never expires; leaving ``ttl`` out uses the
  store's default.
* **LRU**: with ``max_items``, each namespace holds at most that many items; a write that goes
  over evicts the least recently *used* item of the namespace (a :meth:`Store.get` or a write is
  a use; listing with :meth:`Store.items` is not).
* **Order**: :meth:`Store.items` lists the newest *written* items first.
* **Values** are copied in and out through JSON: nothing handed out aliases the store, and a
  value that JSON cannot carry is refused when written.

Failures: opening a store that cannot be used raises :class:`~simplellmfunc.exceptions.ConfigError`
(never a silent fallback to another store); a failure during use raises
:class:`~simplellmfunc.exceptions.RunError`.
"""

from __future__ import annotations

import enum
import json
import time
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ..._persist import json_text
from ..._resource import AsyncResource
from ...exceptions import ConfigError, UserError
from .._clock import Clock
from ._namespace import DEFAULT_SESSION, Namespace, check_key

__all__ = [
    "UNSET",
    "Record",
    "ScopedStore",
    "Store",
    "StoreItem",
    "TTLArg",
    "expired",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"


UNSET = _Unset.UNSET
"""Sentinel: "use the store's default TTL"."""

TTLArg: TypeAlias = float | Literal[_Unset.UNSET] | None


@dataclass(frozen=True, slots=True)
class StoreItem:
    """One stored item.

    Attributes:
        key: Its key within the namespace.
        value: The JSON value (a fresh copy).
        written: When it was written, on the store's clock.
        expires: When it expires, on the store's clock (``None``: never).
    """

    key: str
    value: Any
    written: float
    expires: float | None = None

    def age(self, now: float) -> float:
        """Seconds since the write."""
        return max(0.0, now - self.written)

    def remaining(self, now: float) -> float | None:
        """Seconds left before expiry (``None``: never expires)."""
        return None if self.expires is None else self.expires - now

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for checkpoints)."""
        return {
            "key": self.key,
            "value": self.value,
            "written": self.written,
            "expires": self.expires,
        }


@dataclass(frozen=True, slots=True)
class Record:
    """What an implementation keeps per item: the value as JSON text plus timestamps."""

    key: str
    payload: str
    written: float
    expires: float | None


def _encode(value: Any) -> str:
    try:
        return json_text(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise UserError(f"store values must be JSON-serialisable: {exc}") from None


def _item(record: Record) -> StoreItem:
    return StoreItem(record.key, json.loads(record.payload), record.written, record.expires)


def _check_limits(max_items: int | None, ttl: float | None) -> None:
    if max_items is not None and (not isinstance(max_items, int) or max_items < 1):
        raise ConfigError(f"max_items must be a positive integer or None, got {max_items!r}")
    if ttl is not None and not ttl > 0:
        raise ConfigError(f"ttl must be a positive number of seconds or None, got {ttl!r}")


class Store(AsyncResource):
    """Namespaced JSON items with TTL and LRU eviction (see the module docstring).

    Use as ``async with store:`` or call :meth:`aclose` when done.

    Args:
        max_items: Most items per namespace (``None``: unbounded).
        ttl: Default time to live in seconds (``None``: items never expire).
        clock: Wall-clock source for timestamps and expiry.

    Raises:
        ConfigError: For a non-positive ``max_items`` or ``ttl``.
    """

    def __init__(
        self, *, max_items: int | None = None, ttl: float | None = None, clock: Clock = time.time
    ) -> None:
        _check_limits(max_items, ttl)
        self.max_items = max_items
        self.ttl = ttl
        self.clock = clock

    # -- public API --------------------------------------------------------------------------

    async def get(self, ns: Namespace, key: str) -> StoreItem | None:
        """The live item ``key`` of ``ns`` (marking it used), or ``None``.

        Raises:
            UserError: For an invalid key.
            RunError: If the backend fails.
        """
        record = await self._get(ns, check_key(key), self.clock())
        return None if record is None else _item(record)

    async def set(self, ns: Namespace, key: str, value: Any, *, ttl: TTLArg = UNSET) -> None:
        """Write ``value`` under ``key`` in ``ns`` (evicting the least recently used if full).

        Raises:
            UserError: For an invalid key or a value JSON cannot carry.
            ConfigError: For a non-positive ``ttl``.
            RunError: If the backend fails.
        """
        await self._set(ns, self._new_record(key, value, ttl))

    async def add(
        self, ns: Namespace, key: str, value: Any, *, ttl: TTLArg = UNSET
    ) -> StoreItem | None:
        """Write ``value`` under ``key`` only if ``ns`` has no live item there, atomically.

        The check and the write are one step on every store (one Lua script on Redis, one
        transaction on SQLite), so of several concurrent writers, in this process or others,
        exactly one writes.

        Returns:
            ``None`` when this call wrote the item; else the item already there (left as is).

        Raises:
            UserError: For an invalid key or a value JSON cannot carry.
            ConfigError: For a non-positive ``ttl``.
            RunError: If the backend fails.
        """
        existing = await self._add(ns, self._new_record(key, value, ttl))
        return None if existing is None else _item(existing)

    def _new_record(self, key: str, value: Any, ttl: TTLArg) -> Record:
        """The record a write of ``value`` under ``key`` makes now (key, value, ttl checked)."""
        check_key(key)
        life = self.ttl if ttl is UNSET else ttl
        _check_limits(None, life)
        now = self.clock()
        return Record(key, _encode(value), now, None if life is None else now + life)

    async def delete(self, ns: Namespace, key: str) -> bool:
        """Remove ``key`` from ``ns``; return whether a live item was there.

        Raises:
            UserError: For an invalid key.
            RunError: If the backend fails.
        """
        return await self._delete(ns, check_key(key), self.clock())

    async def items(self, ns: Namespace, limit: int | None = None) -> list[StoreItem]:
        """The live items of ``ns``, newest written first (at most ``limit``); not a use.

        Raises:
            RunError: If the backend fails.
        """
        if limit is not None and limit <= 0:
            return []
        return [_item(r) for r in await self._items(ns, self.clock(), limit)]

    async def keys(self, ns: Namespace) -> list[str]:
        """The keys of the live items of ``ns``, sorted.

        Raises:
            RunError: If the backend fails.
        """
        return sorted(r.key for r in await self._items(ns, self.clock(), None))

    async def clear(self, ns: Namespace) -> int:
        """Remove every item of ``ns``; return how many live items there were.

        Raises:
            RunError: If the backend fails.
        """
        return await self._clear(ns, self.clock())

    async def ping(self) -> None:
        """Check that the store can be used.

        Raises:
            ConfigError: If it cannot (database unreadable, server unreachable).
        """

    async def open(self) -> None:
        """Open the store (``async with`` does): check that it can be used (:meth:`ping`).

        Raises:
            ConfigError: If it cannot (database unreadable, server unreachable).
        """
        await self.ping()

    async def aclose(self) -> None:
        """Release connections (idempotent)."""

    def scope(self, agent: str, session: str = DEFAULT_SESSION) -> ScopedStore:
        """This store seen from one namespace.

        Raises:
            ConfigError: For invalid agent or session names.
        """
        return ScopedStore(self, Namespace(agent, session))

    # -- implementation ----------------------------------------------------------------------

    @abstractmethod
    async def _get(self, ns: Namespace, key: str, now: float) -> Record | None: ...

    @abstractmethod
    async def _set(self, ns: Namespace, record: Record) -> None: ...

    @abstractmethod
    async def _add(self, ns: Namespace, record: Record) -> Record | None: ...

    @abstractmethod
    async def _delete(self, ns: Namespace, key: str, now: float) -> bool: ...

    @abstractmethod
    async def _items(self, ns: Namespace, now: float, limit: int | None) -> list[Record]: ...

    @abstractmethod
    async def _clear(self, ns: Namespace, now: float) -> int: ...


class ScopedStore:
    """A :class:`Store` bound to one namespace: the handle agents and hooks get.

    Every method is the store's method of the same name with the namespace filled in.
    """

    __slots__ = ("namespace", "store")

    def __init__(self, store: Store, namespace: Namespace) -> None:
        self.store = store
        self.namespace = namespace

    async def get(self, key: str) -> StoreItem | None:
        """See :meth:`Store.get`."""
        return await self.store.get(self.namespace, key)

    async def set(self, key: str, value: Any, *, ttl: TTLArg = UNSET) -> None:
        """See :meth:`Store.set`."""
        await self.store.set(self.namespace, key, value, ttl=ttl)

    async def add(self, key: str, value: Any, *, ttl: TTLArg = UNSET) -> StoreItem | None:
        """See :meth:`Store.add`."""
        return await self.store.add(self.namespace, key, value, ttl=ttl)

    async def delete(self, key: str) -> bool:
        """See :meth:`Store.delete`."""
        return await self.store.delete(self.namespace, key)

    async def items(self, limit: int | None = None) -> list[StoreItem]:
        """See :meth:`Store.items`."""
        return await self.store.items(self.namespace, limit)

    async def keys(self) -> list[str]:
        """See :meth:`Store.keys`."""
        return await self.store.keys(self.namespace)

    async def clear(self) -> int:
        """See :meth:`Store.clear`."""
        return await self.store.clear(self.namespace)

    def now(self) -> float:
        """The store's clock."""
        return self.store.clock()

    def __repr__(self) -> str:
        return f"ScopedStore({self.store!r}, {str(self.namespace)!r})"


def expired(record: Record, now: float) -> bool:
    """Whether ``record`` has expired at ``now`` (expiry is inclusive)."""
    return record.expires is not None and now >= record.expires
