"""open_store: one entry point from a store name (as a config file writes it) to an open store."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal, TypeAlias

import anyio

from ..._persist import SQLiteDatabase
from ...exceptions import ConfigError
from .._clock import Clock
from ._base import Store
from ._inmemory import InMemoryStore
from ._redis import RedisStore
from ._sqlite import SQLiteStore

__all__ = ["StoreKind", "open_store"]

_CLOSE_SECONDS = 5.0  # bound on closing a store that failed its check

StoreKind: TypeAlias = Literal["memory", "local", "sqlite", "redis"]
"""``local`` is the seed's name (§8.1 ``LocalMemory``) for ``memory``: this process's memory."""


async def open_store(
    kind: StoreKind,
    *,
    path: str | Path | SQLiteDatabase | None = None,
    url: str | None = None,
    prefix: str = "simplellmfunc",
    max_items: int | None = None,
    ttl: float | None = None,
    clock: Clock = time.time,
) -> Store:
    """Open a store and check it can be used; the caller closes it (``aclose``).

    Args:
        kind: ``"memory"`` (or the seed's ``"local"``), ``"sqlite"`` (needs ``path``) or
            ``"redis"`` (needs ``url``).
        path: The SQLite file (or a shared database).
        url: The Redis URL.
        prefix: The Redis key prefix.
        max_items: Most items per namespace.
        ttl: Default time to live in seconds.
        clock: Wall-clock source.

    Raises:
        ConfigError: For an unknown kind, a missing ``path`` / ``url``, or a store that cannot
            be used (unreadable file, ``redis`` package missing, server unreachable). There is
            no fallback to another kind of store.
    """
    store: Store
    if kind in ("memory", "local"):
        store = InMemoryStore(max_items=max_items, ttl=ttl, clock=clock)
    elif kind == "sqlite":
        if path is None:
            raise ConfigError("a sqlite store needs a path")
        store = SQLiteStore(path, max_items=max_items, ttl=ttl, clock=clock)
    elif kind == "redis":
        if not url:
            raise ConfigError("a redis store needs a url")
        store = RedisStore(url, prefix=prefix, max_items=max_items, ttl=ttl, clock=clock)
    else:
        raise ConfigError(f"unknown store {kind!r}: use 'memory' ('local'), 'sqlite' or 'redis'")
    try:
        await store.ping()
    except BaseException:  # boundary: cleanup, re-raised: a store that cannot be reached is closed
        with anyio.move_on_after(_CLOSE_SECONDS, shield=True):
            await store.aclose()
        raise
    return store
