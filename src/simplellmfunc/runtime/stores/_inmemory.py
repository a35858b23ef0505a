"""InMemoryStore: items in this process's memory, with the semantics of :class:`~._base.Store`."""

from __future__ import annotations

import time
from collections import OrderedDict

from .._clock import Clock
from ._base import Record, Store, expired
from ._namespace import Namespace

__all__ = ["InMemoryStore"]


class InMemoryStore(Store):
    """Items in this process's memory (lost when it exits).

    Each namespace is an ``OrderedDict`` in least-recently-used order; expired items of a
    namespace are dropped whenever it is written.
    """

    def __init__(
        self, *, max_items: int | None = None, ttl: float | None = None, clock: Clock = time.time
    ) -> None:
        super().__init__(max_items=max_items, ttl=ttl, clock=clock)
        self._spaces: dict[Namespace, OrderedDict[str, tuple[int, Record]]] = {}
        self._seq = 0  # write order, so that equal timestamps still sort

    async def _get(self, ns: Namespace, key: str, now: float) -> Record | None:
        space = self._spaces.get(ns)
        entry = None if space is None else space.get(key)
        if space is None or entry is None:
            return None
        if expired(entry[1], now):
            del space[key]
            return None
        space.move_to_end(key)
        return entry[1]

    async def _set(self, ns: Namespace, record: Record) -> None:
        space = self._spaces.setdefault(ns, OrderedDict())
        self._purge(space, record.written)
        self._seq += 1
        space[record.key] = (self._seq, record)
        space.move_to_end(record.key)
        while self.max_items is not None and len(space) > self.max_items:
            space.popitem(last=False)

    async def _add(self, ns: Namespace, record: Record) -> Record | None:
        # No await between the check and the write: atomic on the event loop.
        existing = await self._get(ns, record.key, record.written)
        if existing is None:
            await self._set(ns, record)
        return existing

    async def _delete(self, ns: Namespace, key: str, now: float) -> bool:
        entry = self._spaces.get(ns, OrderedDict()).pop(key, None)
        return entry is not None and not expired(entry[1], now)

    async def _items(self, ns: Namespace, now: float, limit: int | None) -> list[Record]:
        live = [e for e in self._spaces.get(ns, OrderedDict()).values() if not expired(e[1], now)]
        live.sort(key=lambda e: e[0], reverse=True)
        return [record for _, record in live[:limit]]

    async def _clear(self, ns: Namespace, now: float) -> int:
        space = self._spaces.pop(ns, OrderedDict())
        return sum(not expired(record, now) for _, record in space.values())

    @staticmethod
    def _purge(space: OrderedDict[str, tuple[int, Record]], now: float) -> None:
        for key in [k for k, (_, r) in space.items() if expired(r, now)]:
            del space[key]

    def __repr__(self) -> str:
        return f"InMemoryStore(max_items={self.max_items}, ttl={self.ttl})"
