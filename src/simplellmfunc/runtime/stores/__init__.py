"""Stores: JSON values under string keys, per agent and session, with TTL and LRU eviction.

:class:`Store` is the interface (its docstring states the semantics every store keeps);
:class:`InMemoryStore`, :class:`SQLiteStore` (a file opened through ``simplellmfunc._persist``)
and :class:`RedisStore` implement it; :func:`open_store` opens one by name and checks it works.
:class:`ScopedStore` is a store bound to one :class:`Namespace`.
"""

from ..._lazy import publish
from ._base import ScopedStore, Store, StoreItem
from ._inmemory import InMemoryStore
from ._namespace import Namespace
from ._open import StoreKind, open_store
from ._redis import RedisStore
from ._sqlite import SQLiteStore

__all__ = [
    "InMemoryStore",
    "Namespace",
    "RedisStore",
    "SQLiteStore",
    "ScopedStore",
    "Store",
    "StoreItem",
    "StoreKind",
    "open_store",
]

publish(__name__, __all__)
