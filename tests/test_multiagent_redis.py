"""Redis-backed shared memory and channels between two real processes.

The redis-server is the one ``test_runtime_stores.py`` starts for the session (its fixture is
imported here); the second process is a Python child running ``PEER`` against the same server.
"""

from __future__ import annotations

import os
import sys
import uuid

import anyio
import anyio.lowlevel
import pytest

from mcp_servers.support import CHECKOUT_ENV
from simplellmfunc.exceptions import ChannelClosedError, ChannelTimeoutError
from simplellmfunc.runtime.multiagent import RedisChannel, SharedMemory
from simplellmfunc.runtime.stores import RedisStore
from test_runtime_stores import redis_url  # noqa: F401  (the session's redis-server)

PEER = """
import sys, anyio
from simplellmfunc.runtime.multiagent import RedisChannel, SharedMemory
from simplellmfunc.runtime.stores import RedisStore

async def main(url, prefix):
    async with RedisStore(url, prefix=prefix) as store:
        memory = SharedMemory(store, namespace="team")
        await memory.set("plan", {"steps": ["research", "write"], "by": "peer"})
        to_parent = RedisChannel(store, "to-parent", int)
        to_peer = RedisChannel(store, "to-peer", int)
        number = await to_peer.receive(timeout=10)
        await to_parent.send(number * 2)
        await to_parent.close()

anyio.run(main, sys.argv[1], sys.argv[2])
"""


async def test_shared_memory_and_channels_between_two_processes(redis_url: str) -> None:  # noqa: F811
    prefix = f"ma{uuid.uuid4().hex[:8]}"
    env = {**os.environ, **CHECKOUT_ENV}
    async with RedisStore(redis_url, prefix=prefix) as store:
        to_parent = RedisChannel(store, "to-parent", int)
        to_peer = RedisChannel(store, "to-peer", int)
        with anyio.fail_after(20):
            process = await anyio.open_process(
                [sys.executable, "-c", PEER, redis_url, prefix], env=env
            )
            async with process:
                await to_peer.send(21)
                assert await to_parent.receive(timeout=15) == 42
                with pytest.raises(ChannelClosedError):
                    await to_parent.receive(timeout=5)
                with pytest.raises(ChannelClosedError):  # every receiver sees the close
                    await to_parent.receive(timeout=5)
                with pytest.raises(ChannelClosedError):
                    await to_parent.send(1)
                assert await process.wait() == 0
        memory = SharedMemory(store, namespace="team")
        assert await memory.get("plan") == {"steps": ["research", "write"], "by": "peer"}
        assert await memory.namespace("elsewhere").keys() == []
        with pytest.raises(ChannelTimeoutError):
            await to_peer.receive(timeout=0.1)
        with anyio.move_on_after(0.1) as caller:  # a caller's deadline bounds the BLPOP rounds
            await to_peer.receive()
        assert caller.cancelled_caught
        await to_peer.send(7)  # the connection is still in step after those cancellations
        assert await to_peer.receive(timeout=5) == 7
        bounded = RedisChannel(store, "bounded", str, capacity=1)
        await bounded.send("a")
        with pytest.raises(ChannelTimeoutError, match="no room"):
            await bounded.send("b", timeout=0.1)
        await bounded.clear()


@pytest.mark.parametrize("backend", ["memory", "redis"])
async def test_append_only_keeps_one_type_under_concurrent_writers(
    backend: str,
    redis_url: str,  # noqa: F811
) -> None:
    """Six writers on two clients race to write one key with two types: one type wins.

    The seed's append-only rule: a key keeps the type of its first value (same-type rewrites
    are fine, a change of type is refused), and no key is deleted.
    """
    from simplellmfunc.exceptions import SharedMemoryTypeError
    from simplellmfunc.runtime.stores import InMemoryStore

    prefix = f"t{uuid.uuid4().hex[:12]}"
    if backend == "redis":
        stores = [RedisStore(redis_url, prefix=prefix), RedisStore(redis_url, prefix=prefix)]
    else:
        shared = InMemoryStore()
        stores = [shared, shared]
    outcomes: dict[int, str] = {}
    memories: list[SharedMemory] = []

    async def write(n: int) -> None:
        value: object = f"text {n}" if n % 2 else {"n": n}
        await anyio.lowlevel.checkpoint()
        try:
            await memories[n % 2].set("result", value)
        except SharedMemoryTypeError:
            outcomes[n] = "refused"
        else:
            outcomes[n] = "string" if n % 2 else "object"

    try:
        for trial in range(5):  # a fresh namespace, so a fresh race, each trial
            memories[:] = [
                SharedMemory(s, namespace=f"team{trial}", append_only=True) for s in stores
            ]
            outcomes.clear()
            async with anyio.create_task_group() as group:
                for n in range(6):
                    group.start_soon(write, n)
            kinds = {kind for kind in outcomes.values() if kind != "refused"}
            assert len(kinds) == 1, outcomes
            final = await memories[1].get("result")
            assert isinstance(final, str if kinds == {"string"} else dict)
            refused = [n for n, kind in outcomes.items() if kind == "refused"]
            assert len(refused) == 3  # every writer of the other type
    finally:
        if backend == "redis":
            for store in stores:
                await store.aclose()
