"""The running event loop's own functions, looked up once instead of once per call.

Every ``anyio.current_time()`` or ``anyio.lowlevel.checkpoint_if_cancelled()`` first finds the
running backend (``sniffio`` looks at the running loop and the current task): about 1 µs of the
1.5 µs a call costs on asyncio. Hot loops that call them per streamed chunk look the backend
up once, here, and call its function directly. This is the one module that touches anyio's
internals: ``anyio._core._eventloop.get_async_backend``, there through all of anyio 4 (the
pinned major version), which the public functions above call themselves.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from anyio._core._eventloop import get_async_backend

__all__ = ["backend_checkpoint_if_cancelled", "backend_clock"]


def backend_clock() -> Callable[[], float]:
    """``anyio.current_time`` of the running loop, resolved once (call it in a task)."""
    return get_async_backend().current_time


def backend_checkpoint_if_cancelled() -> Callable[[], Awaitable[None]]:
    """``anyio.lowlevel.checkpoint_if_cancelled`` of the running loop, resolved once (call it
    in a task): the returned function raises the cancellation pending in the calling task's
    cancel scopes, without yielding to the loop otherwise."""
    return get_async_backend().checkpoint_if_cancelled
