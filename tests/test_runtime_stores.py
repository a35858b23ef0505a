"""Store semantics (TTL, LRU, namespaces, values) on every store: memory, SQLite and Redis.

The Redis tests run a private ``redis-server`` on a free loopback port (started once per test
session, stopped at the end); they are skipped, saying why, when ``redis-server`` or the
``redis`` package is missing. TTL runs on a controllable clock, never on wall-clock waits.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from simplellmfunc.exceptions import ConfigError, UserError
from simplellmfunc.runtime import (
    InMemoryStore,
    Namespace,
    RedisStore,
    SQLiteDatabase,
    SQLiteStore,
    SQLiteTraceSink,
    Store,
    open_store,
)

A = Namespace("agent-a", "s1")
B = Namespace("agent-b", "s1")
A2 = Namespace("agent-a", "s2")


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for this test session (skips when none can be started)."""
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server; .ci/run does)")
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("the 'redis' package is not installed")
    port = _free_port()
    workdir = tmp_path_factory.mktemp("redis")
    args = [server, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    args += ["--appendonly", "no", "--dir", str(workdir)]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if not _wait_for_port(port, process):
            pytest.skip(f"redis-server did not start on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


MakeStore = Callable[..., Awaitable[Store]]


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def make_store(
    request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock
) -> AsyncIterator[MakeStore]:
    """A factory of stores of one kind on the test clock; all closed after the test."""
    kind = request.param
    url = request.getfixturevalue("redis_url") if kind == "redis" else None
    prefix = f"t{uuid.uuid4().hex[:12]}"  # a fresh key space per test on the shared server
    opened: list[Store] = []

    async def make(max_items: int | None = None, ttl: float | None = None) -> Store:
        store = await open_store(
            kind,
            path=tmp_path / "store.db",
            url=url,
            prefix=prefix,
            max_items=max_items,
            ttl=ttl,
            clock=clock,
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        await store.aclose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- values and keys -------------------------------------------------------------------------


async def test_set_get_delete_round_trip(make_store: MakeStore) -> None:
    store = await make_store()
    value = {"name": "Alice", "tags": ["a", "b"], "n": 1.5, "ok": True, "none": None}
    await store.set(A, "profile", value)
    item = await store.get(A, "profile")
    assert item is not None
    assert item.value == value
    assert item.key == "profile"
    assert item.expires is None
    item.value["tags"].append("c")  # a copy: the store is not affected
    again = await store.get(A, "profile")
    assert again is not None
    assert again.value["tags"] == ["a", "b"]
    await store.set(A, "profile", "replaced")
    replaced = await store.get(A, "profile")
    assert replaced is not None
    assert replaced.value == "replaced"
    assert await store.delete(A, "profile") is True
    assert await store.delete(A, "profile") is False
    assert await store.get(A, "profile") is None
    assert await store.get(A, "never-written") is None


async def test_add_writes_only_where_nothing_lives(make_store: MakeStore, clock: FakeClock) -> None:
    store = await make_store()
    assert await store.add(A, "k", {"v": 1}, ttl=5) is None
    there = await store.add(A, "k", "other")
    assert there is not None
    assert there.value == {"v": 1}
    item = await store.get(A, "k")
    assert item is not None
    assert item.value == {"v": 1}
    clock.advance(6)  # an expired item is no item: add writes again
    assert await store.add(A, "k", "fresh") is None
    fresh = await store.get(A, "k")
    assert fresh is not None
    assert fresh.value == "fresh"


async def test_concurrent_adds_have_one_winner(make_store: MakeStore) -> None:
    first = await make_store()
    # Two clients of one backend (two in-memory stores share nothing: there, one store).
    stores = [first, first if isinstance(first, InMemoryStore) else await make_store()]
    winners: list[int] = []

    async def claim(n: int) -> None:
        if await stores[n % 2].add(A, "lock", n) is None:
            winners.append(n)

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(claim, n)
    assert len(winners) == 1
    item = await stores[0].get(A, "lock")
    assert item is not None
    assert item.value == winners[0]


async def test_bad_values_and_keys_are_refused(make_store: MakeStore) -> None:
    store = await make_store()
    with pytest.raises(UserError, match="JSON"):
        await store.set(A, "k", {"when": object()})
    with pytest.raises(UserError, match="JSON"):
        await store.set(A, "k", float("nan"))
    with pytest.raises(UserError):
        await store.set(A, "", 1)
    with pytest.raises(UserError):
        await store.get(A, "x" * 513)
    with pytest.raises(ConfigError):
        await store.set(A, "k", 1, ttl=0)
    assert await store.keys(A) == []


async def test_items_are_newest_written_first_with_limit(make_store: MakeStore) -> None:
    store = await make_store()
    for key in ("one", "two", "three"):
        await store.set(A, key, key.upper())
    await store.get(A, "one")  # a use, not a write: the order stays
    items = await store.items(A)
    assert [i.key for i in items] == ["three", "two", "one"]
    assert [i.value for i in await store.items(A, 2)] == ["THREE", "TWO"]
    assert await store.items(A, 0) == []
    await store.set(A, "one", "again")  # a rewrite is the newest write
    assert [i.key for i in await store.items(A)] == ["one", "three", "two"]
    assert await store.keys(A) == ["one", "three", "two"]


# -- TTL -------------------------------------------------------------------------------------


async def test_ttl_expires_on_the_store_clock(make_store: MakeStore, clock: FakeClock) -> None:
    store = await make_store()
    await store.set(A, "short", "s", ttl=10)
    await store.set(A, "forever", "f")
    item = await store.get(A, "short")
    assert item is not None
    assert item.expires == clock.now + 10
    assert item.remaining(clock.now) == 10
    clock.advance(9.5)
    assert await store.get(A, "short") is not None
    clock.advance(0.5)  # exactly at expiry: gone
    assert await store.get(A, "short") is None
    assert await store.keys(A) == ["forever"]
    assert [i.key for i in await store.items(A)] == ["forever"]
    assert await store.delete(A, "short") is False
    clock.advance(10**6)
    assert await store.keys(A) == ["forever"]


async def test_default_ttl_and_per_write_override(make_store: MakeStore, clock: FakeClock) -> None:
    store = await make_store(ttl=60)
    await store.set(A, "default", 1)
    await store.set(A, "pinned", 2, ttl=None)
    await store.set(A, "longer", 3, ttl=120)
    clock.advance(61)
    assert await store.keys(A) == ["longer", "pinned"]
    clock.advance(60)
    assert await store.keys(A) == ["pinned"]
    assert await store.clear(A) == 1


async def test_rewrite_restarts_the_ttl(make_store: MakeStore, clock: FakeClock) -> None:
    store = await make_store(ttl=10)
    await store.set(A, "k", "v1")
    clock.advance(8)
    await store.set(A, "k", "v2")
    clock.advance(8)
    item = await store.get(A, "k")
    assert item is not None
    assert item.value == "v2"
    assert item.age(clock.now) == 8


# -- LRU -------------------------------------------------------------------------------------


async def test_lru_evicts_the_least_recently_used(make_store: MakeStore) -> None:
    store = await make_store(max_items=3)
    for key in ("a", "b", "c"):
        await store.set(A, key, key)
    assert await store.get(A, "a") is not None  # a is now the most recently used
    await store.set(A, "d", "d")
    assert await store.keys(A) == ["a", "c", "d"]
    await store.items(A)  # listing is not a use
    await store.set(A, "e", "e")  # c was used least recently
    assert await store.keys(A) == ["a", "d", "e"]
    await store.set(A, "a", "a2")  # a rewrite is a use and evicts nothing
    assert await store.keys(A) == ["a", "d", "e"]
    await store.set(A, "f", "f")
    assert await store.keys(A) == ["a", "e", "f"]


async def test_expired_items_do_not_take_room(make_store: MakeStore, clock: FakeClock) -> None:
    store = await make_store(max_items=2)
    await store.set(A, "old", 1, ttl=5)
    await store.set(A, "keep", 2)
    clock.advance(6)
    await store.set(A, "new", 3)  # "old" expired: "keep" must not be evicted for "new"
    assert await store.keys(A) == ["keep", "new"]


async def test_capacity_is_per_namespace(make_store: MakeStore) -> None:
    store = await make_store(max_items=2)
    for key in ("a", "b"):
        await store.set(A, key, 1)
        await store.set(B, key, 2)
        await store.set(A2, key, 3)
    await store.set(A, "c", 1)
    assert await store.keys(A) == ["b", "c"]
    assert await store.keys(B) == ["a", "b"]
    assert await store.keys(A2) == ["a", "b"]


# -- namespaces ------------------------------------------------------------------------------


async def test_namespaces_are_kept_apart(make_store: MakeStore) -> None:
    store = await make_store()
    await store.set(A, "name", "Alice")
    await store.set(B, "name", "Bob")
    await store.set(A2, "name", "Ann")
    # Keys that look like another namespace's layout stay inside their own namespace.
    await store.set(A, "agent-b:s1:i:name", "sneaky")
    b_item = await store.get(B, "name")
    assert b_item is not None
    assert b_item.value == "Bob"
    assert await store.keys(B) == ["name"]
    assert await store.delete(B, "agent-b:s1:i:name") is False
    assert await store.clear(A) == 2
    assert await store.keys(A) == []
    assert await store.keys(B) == ["name"]
    a2_item = await store.get(A2, "name")
    assert a2_item is not None
    assert a2_item.value == "Ann"
    scoped = store.scope("agent-b", "s1")
    assert scoped.namespace == B
    await scoped.set("mood", "ok")
    assert await scoped.keys() == ["mood", "name"]
    assert await store.keys(A) == []


@pytest.mark.parametrize("name", ["", "a:b", "a b", "a*", "x" * 129, "a/b"])
def test_namespace_names_are_validated(name: str) -> None:
    with pytest.raises(ConfigError):
        Namespace(name)
    with pytest.raises(ConfigError):
        Namespace("agent", name)


# -- persistence and sharing -----------------------------------------------------------------


async def test_sqlite_persists_and_is_shared(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "mem.db"
    async with SQLiteStore(path, max_items=2, clock=clock) as first:
        second = SQLiteStore(path, max_items=2, clock=clock)  # another connection, same file
        try:
            await first.set(A, "a", 1)
            await second.set(A, "b", 2)
            await first.set(A, "c", 3)  # the file holds a and b: a is evicted
            assert await second.keys(A) == ["b", "c"]
        finally:
            await second.aclose()
    async with SQLiteStore(path, clock=clock) as reopened:
        assert [i.value for i in await reopened.items(A)] == [3, 2]


async def test_sqlite_concurrent_writes(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "c.db") as store:
        async with anyio.create_task_group() as group:
            for n in range(40):
                group.start_soon(store.set, A, f"k{n:02d}", n)
        assert len(await store.keys(A)) == 40


async def test_one_sqlite_database_serves_store_and_trace_sink(tmp_path: Path) -> None:
    database = SQLiteDatabase(tmp_path / "shared.db")
    try:
        store = SQLiteStore(database)
        sink = SQLiteTraceSink(database)
        await store.set(A, "k", "v")
        await store.aclose()  # the shared database stays open
        await sink.aclose()
        assert not database.closed
        item = await SQLiteStore(database).get(A, "k")
        assert item is not None
        assert item.value == "v"
    finally:
        database.close()
    assert database.closed


async def test_redis_store_is_shared_between_clients(redis_url: str, clock: FakeClock) -> None:
    prefix = f"t{uuid.uuid4().hex[:12]}"
    async with (
        RedisStore(redis_url, prefix=prefix, clock=clock) as one,
        RedisStore(redis_url, prefix=prefix, clock=clock) as two,
    ):
        await one.set(A, "k", {"v": 1}, ttl=30)
        item = await two.get(A, "k")
        assert item is not None
        assert item.value == {"v": 1}
        assert item.expires == clock.now + 30
        assert "redis://127.0.0.1" in repr(one)
        # The item also carries a native expiry, so an abandoned namespace empties itself.
        from redis.asyncio import Redis

        raw = Redis.from_url(redis_url)
        try:
            assert 0 < await raw.pttl(f"{prefix}:agent-a:s1:i:k") <= 30_000
        finally:
            await raw.aclose()


# -- failing loudly --------------------------------------------------------------------------


async def test_open_store_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown store"):
        await open_store("postgres")  # type: ignore[arg-type]
    async with await open_store("local") as local:  # the seed's name for the in-memory store
        assert isinstance(local, InMemoryStore)
    with pytest.raises(ConfigError, match="path"):
        await open_store("sqlite")
    with pytest.raises(ConfigError, match="url"):
        await open_store("redis")
    with pytest.raises(ConfigError, match="cannot open SQLite"):
        await open_store("sqlite", path=tmp_path)  # a folder (a missing one is created)
    (tmp_path / "not.db").write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError):
        await open_store("sqlite", path=tmp_path / "not.db")
    with pytest.raises(ConfigError):
        await open_store("memory", max_items=0)


async def test_unreachable_redis_fails_loudly_without_secrets() -> None:
    pytest.importorskip("redis")
    url = f"redis://:hunter2-secret@127.0.0.1:{_free_port()}/0"
    with pytest.raises(ConfigError, match="cannot use Redis") as caught:
        await open_store("redis", url=url)
    assert "hunter2" not in str(caught.value)
    assert "***" in str(caught.value)


async def test_missing_redis_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # Hide the third-party package as if it were not installed.
    for name in [m for m in sys.modules if m == "redis" or m.startswith("redis.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "redis", None)
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)
    with pytest.raises(ConfigError, match="'redis' package"):
        await open_store("redis", url="redis://127.0.0.1:6379/0")


def test_in_memory_store_repr() -> None:
    assert repr(InMemoryStore(max_items=3, ttl=5)) == "InMemoryStore(max_items=3, ttl=5)"
