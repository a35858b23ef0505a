"""RedisStore: items shared by several processes, on one Redis server (the ``redis`` package).

Layout per namespace, under ``<prefix>:<agent>:<session>:`` (names cannot contain ``:``):

* ``i:<key>``: the item, a string ``[written, expires]\\n<value JSON>`` with a native ``PX``
  expiry (so an abandoned namespace empties itself);
* ``lru`` / ``rec``: sorted sets of keys scored by a per-namespace counter (``seq``) at last use
  and at write: LRU eviction pops the lowest ``lru`` score, listing walks ``rec`` downwards;
* ``exp``: a sorted set of keys scored by their expiry on the store's clock, the logical TTL
  shared with the other stores (a test clock works here too).

Every operation is one Lua script, so it is atomic across processes. Scripts build item keys
from the prefix, which Redis Cluster does not allow: this store targets a single server (with
replicas if wanted). The ``redis`` package is imported when a store is created; without it, or
without a reachable server, the store refuses to open (:class:`ConfigError`), never falling back
to another store.
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ...exceptions import ConfigError, RunError
from .._clock import Clock
from ._base import Record, Store
from ._namespace import Namespace

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

__all__ = ["RedisStore", "redact_url"]

_DROP = """
local function drop(prefix, k)
  redis.call('DEL', prefix .. k)
  redis.call('ZREM', KEYS[1], k)
  redis.call('ZREM', KEYS[2], k)
  redis.call('ZREM', KEYS[3], k)
end
local function purge(prefix, now)
  for _, k in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)) do drop(prefix, k) end
end
local function live(prefix, k, now)
  local e = redis.call('ZSCORE', KEYS[3], k)
  if e and tonumber(e) <= tonumber(now) then return false end
  return redis.call('GET', prefix .. k)
end
"""
# KEYS: lru, rec, exp, seq. ARGV[1] = item key prefix; further ARGV per script.
_GET = (  # ARGV: prefix, key, now
    _DROP
    + """
local p = live(ARGV[1], ARGV[2], ARGV[3])
if not p then drop(ARGV[1], ARGV[2]) return false end
redis.call('ZADD', KEYS[1], redis.call('INCR', KEYS[4]), ARGV[2])
return p
"""
)
_PUT = """
local function put()
  purge(ARGV[1], ARGV[5])
  local s = redis.call('INCR', KEYS[4])
  if tonumber(ARGV[4]) > 0 then
    redis.call('SET', ARGV[1] .. ARGV[2], ARGV[3], 'PX', ARGV[4])
  else
    redis.call('SET', ARGV[1] .. ARGV[2], ARGV[3])
  end
  redis.call('ZADD', KEYS[1], s, ARGV[2])
  redis.call('ZADD', KEYS[2], s, ARGV[2])
  if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], ARGV[6], ARGV[2])
  else redis.call('ZREM', KEYS[3], ARGV[2]) end
  local max = tonumber(ARGV[7])
  if max > 0 then
    for _, k in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
      if redis.call('EXISTS', ARGV[1] .. k) == 0 then drop(ARGV[1], k) end
    end
    local over = redis.call('ZCARD', KEYS[1]) - max
    if over > 0 then
      for _, k in ipairs(redis.call('ZRANGE', KEYS[1], 0, over - 1)) do drop(ARGV[1], k) end
    end
  end
end
"""
# ARGV of set / add: prefix, key, envelope, ttl_ms (0: none), now, expires ('': none), max (0: none)
_SET = _DROP + _PUT + "put() return 1"
_ADD = (  # returns the live envelope already there (nothing written), or false (written)
    _DROP
    + _PUT
    + """
local p = live(ARGV[1], ARGV[2], ARGV[5])
if p then return p end
put()
return false
"""
)
_DELETE = (  # ARGV: prefix, key, now
    _DROP
    + """
local p = live(ARGV[1], ARGV[2], ARGV[3])
drop(ARGV[1], ARGV[2])
if p then return 1 end
return 0
"""
)
_ITEMS = (  # ARGV: prefix, now, limit (-1: all); returns key, envelope, key, envelope, ...
    _DROP
    + """
purge(ARGV[1], ARGV[2])
local limit = tonumber(ARGV[3])
local out = {}
for _, k in ipairs(redis.call('ZREVRANGE', KEYS[2], 0, -1)) do
  if limit >= 0 and #out >= 2 * limit then break end
  local p = redis.call('GET', ARGV[1] .. k)
  if p then table.insert(out, k) table.insert(out, p) else drop(ARGV[1], k) end
end
return out
"""
)
_CLEAR = (  # ARGV: prefix, now; returns the number of live items
    _DROP
    + """
purge(ARGV[1], ARGV[2])
local n = 0
for _, k in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if redis.call('DEL', ARGV[1] .. k) == 1 then n = n + 1 end
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
return n
"""
)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for errors and reprs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable url>"
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def _connect(url: str) -> Redis:
    try:
        from redis.asyncio import Redis
    except ImportError:
        raise ConfigError(
            "the Redis store needs the 'redis' package (pip install 'redis>=5')"
        ) from None
    try:
        client: Redis = Redis.from_url(url, decode_responses=True)
    except ValueError as exc:
        raise ConfigError(f"invalid Redis URL {redact_url(url)!r}: {exc}") from None
    return client


class RedisStore(Store):
    """Items on a Redis server, shared by every process that uses the same URL and prefix.

    Connections are made on first use; ``async with`` (or :meth:`ping`) checks the server at
    once. Requires the asyncio event loop (the ``redis`` client is asyncio-only).

    Args:
        url: ``redis://[:password@]host:port/db`` (or ``rediss://``, ``unix://``).
        prefix: The first part of every key this store writes.
        max_items: Most items per namespace (``None``: unbounded).
        ttl: Default time to live in seconds (``None``: never expire).
        clock: Wall-clock source for the logical expiry.

    Raises:
        ConfigError: If the ``redis`` package is missing or the URL is invalid.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "simplellmfunc",
        max_items: int | None = None,
        ttl: float | None = None,
        clock: Clock = time.time,
    ) -> None:
        super().__init__(max_items=max_items, ttl=ttl, clock=clock)
        if not prefix or ":" in prefix:
            raise ConfigError(f"a Redis key prefix must be non-empty without ':', got {prefix!r}")
        self.url = url
        self.prefix = prefix
        self._client = _connect(url)
        self._scripts: dict[str, AsyncScript] = {}

    @property
    def client(self) -> Redis:
        """The store's ``redis.asyncio`` client (channels on the same server use it)."""
        return self._client

    def key(self, *parts: str) -> str:
        """A key under this store's prefix: ``<prefix>:<part>:<part>...``."""
        return ":".join((self.prefix, *parts))

    async def ping(self) -> None:
        """Check that the server answers.

        Raises:
            ConfigError: If it does not (wrong address, authentication, not a Redis server).
        """
        from redis.exceptions import RedisError

        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            raise ConfigError(f"cannot use Redis at {redact_url(self.url)!r}: {exc}") from None

    async def aclose(self) -> None:
        """Close the connections (idempotent)."""
        await self._client.aclose()

    async def _run(self, name: str, ns: Namespace, *args: Any) -> Any:
        from redis.exceptions import RedisError

        script = self._scripts.get(name)
        if script is None:
            script = self._scripts[name] = self._client.register_script(_SOURCES[name])
        base = f"{self.prefix}:{ns.agent}:{ns.session}:"
        keys = [base + "lru", base + "rec", base + "exp", base + "seq"]
        try:
            return await script(keys=keys, args=[base + "i:", *args])
        except (RedisError, OSError) as exc:
            raise RunError(f"Redis {name} failed at {redact_url(self.url)!r}: {exc}") from None

    async def _get(self, ns: Namespace, key: str, now: float) -> Record | None:
        envelope = await self._run("get", ns, key, repr(now))
        return None if envelope is None else _record(key, envelope)

    def _put_args(self, record: Record) -> tuple[Any, ...]:
        expires = record.expires
        ttl_ms = 0 if expires is None else max(1, math.ceil((expires - record.written) * 1000))
        header = json.dumps([record.written, expires])
        return (
            record.key,
            f"{header}\n{record.payload}",
            ttl_ms,
            repr(record.written),
            "" if expires is None else repr(expires),
            self.max_items or 0,
        )

    async def _set(self, ns: Namespace, record: Record) -> None:
        await self._run("set", ns, *self._put_args(record))

    async def _add(self, ns: Namespace, record: Record) -> Record | None:
        envelope = await self._run("add", ns, *self._put_args(record))
        return None if envelope is None else _record(record.key, envelope)

    async def _delete(self, ns: Namespace, key: str, now: float) -> bool:
        return bool(await self._run("delete", ns, key, repr(now)))

    async def _items(self, ns: Namespace, now: float, limit: int | None) -> list[Record]:
        flat = await self._run("items", ns, repr(now), -1 if limit is None else limit)
        return [_record(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]

    async def _clear(self, ns: Namespace, now: float) -> int:
        return int(await self._run("clear", ns, repr(now)))

    def __repr__(self) -> str:
        return (
            f"RedisStore({redact_url(self.url)!r}, prefix={self.prefix!r}, "
            f"max_items={self.max_items}, ttl={self.ttl})"
        )


_SOURCES = {
    "get": _GET,
    "set": _SET,
    "add": _ADD,
    "delete": _DELETE,
    "items": _ITEMS,
    "clear": _CLEAR,
}


def _record(key: str, envelope: str) -> Record:
    header, _, payload = envelope.partition("\n")
    try:
        written, expires = json.loads(header)
    except (ValueError, TypeError):
        raise RunError(f"corrupt Redis store item {key!r}") from None
    return Record(key, payload, float(written), None if expires is None else float(expires))
