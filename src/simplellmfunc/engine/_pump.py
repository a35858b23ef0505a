"""The event pump: run an engine coroutine in a task and stream what it sends, live.

Tools of a batch run concurrently and emit events while they run, so the run needs its own
task; the consumer's ``async for`` reads from a memory stream. :func:`event_pump` runs that
task in a task group of the consumer's (leaving early cancels the run); :func:`start_pump` runs
it in an owner's task group and :func:`pump_items` reads it, with a policy for a reader that
leaves early (the run goes on: a session store aborts it, or keeps it for a later reader).

This is one of the named boundaries where ``except Exception`` is right: a failure of the run is
carried across the stream and re-raised in the consumer's task, unchanged, after the run's task
group has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.lowlevel import checkpoint_if_cancelled
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..exceptions import RunError

__all__ = ["Finished", "Send", "being_cancelled", "event_pump", "pump_items", "start_pump"]

_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError)
_NO_GROUP: Any = contextlib.nullcontext()  # a started pump's reader has no task group

Send = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Finished:
    """The last item of a pump: the run's return value."""

    value: Any


@dataclass(frozen=True, slots=True)
class _Failed:
    error: Exception


def being_cancelled() -> bool:
    """Whether the current task has a cancellation request pending (a cancel scope, a caller).

    A ``CancelledError`` raised while none is pending did not come from cancelling this task:
    something awaited a future that another party cancelled.
    """
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not on asyncio (trio has no stray cancellations to tell apart)
        return True
    return task is None or task.cancelling() > 0


def _sender(stream: MemoryObjectSendStream[Any]) -> Send:
    """``stream.send`` without its event-loop pass when the buffer has room.

    ``MemoryObjectSendStream.send`` yields to the loop before every item: one pass per event,
    per streamed chunk. Here an item goes into the buffer at once, after a check for a pending
    cancellation (so sending stays a cancellation point); only a full buffer waits. Concurrent
    emitters still arrive in ``seq`` order: numbering and buffering happen with no await in
    between, and once one sender waits, the next ones queue behind it (first in, first out)
    instead of slipping into the room the consumer frees.
    """
    waiting = 0

    async def send(item: Any) -> None:
        nonlocal waiting
        if not waiting:
            await checkpoint_if_cancelled()
            try:
                stream.send_nowait(item)
                return
            except anyio.WouldBlock:
                pass
        waiting += 1
        try:
            await stream.send(item)
        finally:
            waiting -= 1

    return send


async def _run(body: Callable[[Send], Awaitable[Any]], send: MemoryObjectSendStream[Any]) -> None:
    async with send:
        try:
            value = await body(_sender(send))
        except Exception as exc:  # boundary: re-raised in the consumer's task
            last: Any = _Failed(exc)
        except anyio.get_cancelled_exc_class() as exc:
            if being_cancelled():
                raise
            error = RunError("the run was cancelled by something other than its caller")
            error.__cause__ = exc
            last = _Failed(error)
        else:
            last = Finished(value)
        try:
            await send.send(last)
        except _GONE:  # the reader left for good (a started pump's): the run ended without it
            pass


def start_pump(
    body: Callable[[Send], Awaitable[Any]], tasks: TaskGroup, buffer: int = 256
) -> MemoryObjectReceiveStream[Any]:
    """Start ``body(send)`` in ``tasks`` (an owner's task group, not the reader's) and return
    the stream of what it sends, for :func:`pump_items`.

    The run belongs to the owner: a reader that leaves does not cancel it. Once the stream is
    closed, ``send`` raises ``anyio.BrokenResourceError`` (a body that goes on without a reader
    catches it); the run's own end is then dropped.
    """
    send, receive = anyio.create_memory_object_stream[Any](buffer)
    tasks.start_soon(_run, body, send)
    return receive


def pump_items(
    receive: MemoryObjectReceiveStream[Any], *, on_leave: Callable[[], bool] | None = None
) -> AsyncGenerator[Any, None]:
    """Yield what a :func:`start_pump` run sends, to its end (its return value is dropped).

    A reader that leaves before the end calls ``on_leave``: it returns whether the stream is
    kept open (a later ``pump_items(receive)`` goes on where this one stopped); otherwise, or
    without ``on_leave``, the stream is closed and the run goes on without a reader.

    Raises:
        Exception: Whatever the body raised.
        RunError: If the run ended without a result (its task was cancelled).
    """
    return _read(receive, None, on_leave=on_leave)


def event_pump(
    body: Callable[[Send], Awaitable[Any]], buffer: int = 256, *, unwrap: bool = False
) -> AsyncGenerator[Any, None]:
    """Run ``body(send)`` and yield everything it sends, then a :class:`Finished` item.

    With ``unwrap``, the last item is the return value itself instead of a :class:`Finished`
    (for a consumer that yields it on: one generator layer less per item).
    Leaving the iteration early cancels the run (use ``contextlib.aclosing`` when breaking
    out, so that happens at once and in the consuming task).

    Raises:
        Exception: Whatever ``body`` raised, after its task has ended.
        RunError: If the run ended without a result (it never ends silently).
    """
    return _read(None, (body, buffer), last="value" if unwrap else "item")


async def _read(
    receive: MemoryObjectReceiveStream[Any] | None,
    own: tuple[Callable[[Send], Awaitable[Any]], int] | None,
    *,
    on_leave: Callable[[], bool] | None = None,
    last: str | None = None,
) -> AsyncGenerator[Any, None]:
    """The one read loop of both pumps: the items of ``receive`` (a started pump's), or of
    ``own`` (``(body, buffer)``: started here, in a task group of the reader's, cancelled when
    the reader leaves); the return value is yielded as ``last`` says (``None``: dropped,
    ``"item"``: the :class:`Finished`, ``"value"``: its value)."""
    failure: Exception | None = None
    finished = False
    ended = False  # the stream ended (or failed): the reader did not leave early
    try:
        async with anyio.create_task_group() if own is not None else _NO_GROUP as group:
            if own is not None:
                receive = start_pump(own[0], group, own[1])
            assert receive is not None
            try:
                while True:
                    # Buffered items without a checkpoint each (one event-loop pass saved per
                    # event: a streamed reply sends one per chunk); wait when there are none.
                    try:
                        item = receive.receive_nowait()
                    except anyio.WouldBlock:
                        try:
                            item = await receive.receive()
                        except anyio.EndOfStream:
                            break
                    except anyio.EndOfStream:
                        break
                    kind = type(item)
                    if kind is _Failed:
                        failure = item.error
                        break
                    if kind is Finished:
                        finished = True
                        if last is not None:
                            yield item.value if last == "value" else item
                        break
                    yield item
                ended = True
            finally:
                if ended or on_leave is None or not on_leave():
                    receive.close()
                if own is not None:
                    group.cancel_scope.cancel()
    except BaseExceptionGroup as group_error:
        # The run catches its own failures, so the group holds what was thrown in at the
        # ``yield``: GeneratorExit when the consumer closes us early. ``aclose`` needs it bare.
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise
    if failure is not None:
        raise failure
    if not finished:
        raise RunError("the run ended without a result")
