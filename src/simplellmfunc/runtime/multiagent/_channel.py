"""Typed channels between agents (seed 001 §17.1): send, receive with timeouts, close.

:class:`Channel` lives in this process (an anyio memory stream: ``capacity=0`` is a rendezvous,
a send waits for its receiver); :class:`RedisChannel` is the same interface across processes,
on a :class:`~simplellmfunc.runtime.stores.RedisStore`'s server (a Redis list: ``RPUSH`` to
send, ``BLPOP`` to receive, a close marker that every receiver sees once the list is drained).
Values are checked against the channel's type (pydantic), and travel as JSON over Redis. Each
handle keeps a bounded history of what went through it (:attr:`Channel.history`: direction,
value, time), as the seed's channels do; a Redis channel's history is this process's handle's.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import anyio
import anyio.lowlevel
from pydantic import TypeAdapter, ValidationError

from ..._resource import AsyncResource
from ...exceptions import ChannelClosedError, ChannelError, ChannelTimeoutError, UserError
from ..stores import RedisStore

__all__ = ["Channel", "ChannelRecord", "RedisChannel"]

T = TypeVar("T")

_CLOSED = "\x00closed"  # the close marker on a Redis list (never valid JSON)
_POLL_SECONDS = 0.02  # how often a bounded Redis channel looks for room
_BLOCK_SECONDS = 1.0  # one BLPOP round, well under the client's socket timeout


@dataclass(frozen=True, slots=True)
class ChannelRecord:
    """One value that went through a channel handle.

    Attributes:
        direction: ``"send"`` or ``"receive"``.
        message: The value.
        time: When, in seconds since the epoch.
    """

    direction: Literal["send", "receive"]
    message: Any
    time: float


class Channel(AsyncResource, Generic[T]):
    """A channel in this process.

    ``async with channel:`` releases it on leaving (:meth:`aclose`); :meth:`close` alone says
    "no more values" and lets receivers drain what was sent.

    Args:
        item_type: The type of the values (checked on send); ``Any`` by default.
        capacity: Values buffered before a send waits (``0``: every send waits for a receive).
        name: A label for errors.
        history_size: How many records :attr:`history` keeps (the oldest go first; ``0``: none).
    """

    def __init__(
        self,
        item_type: Any = Any,
        *,
        capacity: int = 0,
        name: str = "channel",
        history_size: int = 1000,
    ) -> None:
        if capacity < 0:
            raise UserError("a channel's capacity must be 0 or more")
        if history_size < 0:
            raise UserError("a channel's history_size must be 0 or more")
        self.name = name
        self.capacity = capacity
        self._type: TypeAdapter[T] = TypeAdapter(item_type)
        self._in, self._out = anyio.create_memory_object_stream[T](capacity)
        self._history: deque[ChannelRecord] = deque(maxlen=history_size)

    @property
    def history(self) -> tuple[ChannelRecord, ...]:
        """What this handle sent and received, oldest first (at most ``history_size``)."""
        return tuple(self._history)

    async def send(self, value: T, *, timeout: float | None = None) -> None:
        """Send ``value``, waiting at most ``timeout`` seconds for room.

        Raises:
            ChannelError: If ``value`` is not of the channel's type.
            ChannelClosedError: If the channel is closed.
            ChannelTimeoutError: If there was no room in time.
        """
        checked = self._check(value)
        try:
            with anyio.fail_after(timeout):
                await self._put(checked)
        except TimeoutError:
            raise ChannelTimeoutError(f"{self.name}: no room within {timeout:g} s") from None
        self._history.append(ChannelRecord("send", checked, time.time()))

    async def receive(self, *, timeout: float | None = None) -> T:
        """The next value, waiting at most ``timeout`` seconds.

        Raises:
            ChannelClosedError: If the channel is closed and drained.
            ChannelTimeoutError: If nothing arrived in time.
        """
        try:
            with anyio.fail_after(timeout):
                value = await self._get()
        except TimeoutError:
            raise ChannelTimeoutError(
                f"{self.name}: nothing received within {timeout:g} s"
            ) from None
        self._history.append(ChannelRecord("receive", value, time.time()))
        return value

    async def close(self) -> None:
        """Close the channel: sends fail from now on; receivers get what was sent, then
        :class:`ChannelClosedError` (idempotent)."""
        self._in.close()

    def __aiter__(self) -> AsyncIterator[T]:
        return self._values()

    async def _values(self) -> AsyncIterator[T]:
        while True:
            try:
                yield await self.receive()
            except ChannelClosedError:
                return

    async def aclose(self) -> None:
        """Release the channel: close it and drop what no one received (idempotent)."""
        await self.close()
        self._out.close()

    def _check(self, value: object) -> T:
        try:
            return self._type.validate_python(value)
        except ValidationError as exc:
            raise ChannelError(f"{self.name}: a value of the wrong type: {exc}") from None

    async def _put(self, value: T) -> None:
        try:
            await self._in.send(value)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise ChannelClosedError(f"{self.name} is closed") from None

    async def _get(self) -> T:
        try:
            return await self._out.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise ChannelClosedError(f"{self.name} is closed") from None


class RedisChannel(Channel[T]):
    """A channel on a Redis server, shared by every process that opens it with the same store
    prefix and name.

    Args:
        store: The Redis store whose server (and key prefix) the channel uses.
        name: The channel's name.
        item_type: The type of the values (JSON on the wire, checked both ways).
        capacity: Values queued before a send waits (``0``: unbounded on Redis).
        history_size: How many records this handle's :attr:`history` keeps.
    """

    def __init__(
        self,
        store: RedisStore,
        name: str,
        item_type: object = Any,
        *,
        capacity: int = 0,
        history_size: int = 1000,
    ) -> None:
        super().__init__(item_type, capacity=capacity, name=name, history_size=history_size)
        self._in.close()
        self._out.close()
        self._redis = store.client
        self._key = store.key("channel", name)

    async def close(self) -> None:
        """Close the channel for every process (idempotent)."""
        await self._call("rpush", self._key, _CLOSED)

    async def aclose(self) -> None:
        """Nothing to release: the channel outlives this process's handle (:meth:`close`
        closes it for every process)."""

    async def clear(self) -> None:
        """Forget everything queued, and a close (the channel can be used anew)."""
        await self._call("delete", self._key)

    async def _put(self, value: T) -> None:
        data = self._type.dump_json(value).decode()
        while True:
            tail = await self._call("lrange", self._key, -1, -1)
            if tail == [_CLOSED]:
                raise ChannelClosedError(f"{self.name} is closed")
            if not self.capacity or await self._call("llen", self._key) < self.capacity:
                break
            await anyio.sleep(_POLL_SECONDS)
        await self._call("rpush", self._key, data)

    async def _get(self) -> T:
        # BLPOP waits on the server in short rounds: the client's socket timeout (5 s by default
        # in redis-py) must not cut a long wait. The receive's fail_after (or a caller's scope)
        # bounds the whole of it; its deadline shortens the last round, so that no BLPOP is
        # cancelled mid-command.
        deadline = anyio.current_effective_deadline()
        while True:
            left = min(deadline - anyio.current_time(), _BLOCK_SECONDS)
            popped = await self._call("blpop", [self._key], max(left, 0.01))
            if popped is not None:
                break
            await anyio.lowlevel.checkpoint()  # past the deadline: the cancel lands here
        data = popped[1]
        if data == _CLOSED:
            await self._call("lpush", self._key, _CLOSED)  # for the next receiver
            raise ChannelClosedError(f"{self.name} is closed")
        try:
            return self._type.validate_json(data)
        except ValidationError as exc:
            raise ChannelError(f"{self.name}: a value of the wrong type: {exc}") from None

    async def _call(self, command: str, *args: object) -> Any:
        from redis.exceptions import RedisError

        try:
            return await getattr(self._redis, command)(*args)
        except (RedisError, OSError) as exc:
            raise ChannelError(f"{self.name}: Redis failed: {exc}") from None
