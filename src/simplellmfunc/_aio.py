"""The running event loop's own functions, looked up once instead of once per call.

Every ``anyio.current_time()`` or ``anyio.lowlevel.checkpoint_if_cancelled()`` first finds the
running backend (``sniffio`` looks at the running loop and the current task): about 1 µs of the
1.5 µs a call costs on asyncio. Hot loops that call them per streamed chunk look the backend
up once, here, and call its function directly. This is the one module that touches anyio's
internals (``anyio._core._eventloop.get_async_backend``); should a later anyio move it, the
public functions are used instead and only speed is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

__all__ = ["backend_checkpoint_if_cancelled", "backend_clock"]

try:
    from anyio._core._eventloop import get_async_backend as _get_async_backend
except ImportError:  # pragma: no cover - a future anyio; the public functions still work
    _get_async_backend = None


def backend_clock() -> Callable[[], float]:
    """``anyio.current_time`` of the running loop, resolved once (call it in a task)."""
    if _get_async_backend is None:  # pragma: no cover
        return anyio.current_time
    return _get_async_backend().current_time


def backend_checkpoint_if_cancelled() -> Callable[[], Awaitable[None]]:
    """``anyio.lowlevel.checkpoint_if_cancelled`` of the running loop, resolved once (call it
    in a task): the returned function raises the cancellation pending in the calling task's
    cancel scopes, without yielding to the loop otherwise."""
    if _get_async_backend is None:  # pragma: no cover
        return anyio.lowlevel.checkpoint_if_cancelled
    return _get_async_backend().checkpoint_if_cancelled
