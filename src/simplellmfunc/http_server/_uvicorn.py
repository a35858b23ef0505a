"""Running an ASGI app under uvicorn in this event loop, on a socket bound before it starts."""

from __future__ import annotations

import signal
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn

__all__ = ["bind", "running", "serve_app", "server_for"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


Hook = Callable[[], Awaitable[None]]


class _Server(uvicorn.Server):
    """uvicorn, calling ``before_shutdown`` (abort the running turns) before it waits for open
    requests to end."""

    def __init__(self, config: uvicorn.Config, before_shutdown: Hook | None) -> None:
        super().__init__(config)
        self._before_shutdown = before_shutdown

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT / SIGTERM start a graceful shutdown; unlike uvicorn's own, the signal is not
        raised again afterwards (the command then exits normally)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        signals = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._before_shutdown is not None:
            await self._before_shutdown()
        await super().shutdown(sockets)


def server_for(
    app: Any, *, before_shutdown: Hook | None = None, graceful_seconds: int = 10
) -> uvicorn.Server:
    """A uvicorn server for ``app``: on shutdown it calls ``before_shutdown`` (abort the running
    turns: their streams then end with a valid history), then waits ``graceful_seconds`` for
    open requests."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=graceful_seconds,
        access_log=False,
    )
    return _Server(config, before_shutdown)


@asynccontextmanager
async def running(
    make_app: Callable[[str], Any],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    before_shutdown: Hook | None = None,
) -> AsyncIterator[str]:
    """Serve ``make_app(base_url)`` while the block runs; yields the base URL
    (``http://host:port``, known once the socket is bound)."""
    sock = bind(host, port)
    try:
        bound = sock.getsockname()[1]
        server = server_for(make_app(f"http://{host}:{bound}"), before_shutdown=before_shutdown)
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve, [sock])
            try:
                yield f"http://{host}:{bound}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


async def serve_app(
    make_app: Callable[[str], Any],
    host: str,
    port: int,
    *,
    before_shutdown: Hook | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``make_app(base_url)`` on ``host:port`` until SIGINT / SIGTERM, then shut down
    gracefully: ``before_shutdown`` first (abort the running turns: each ends with a valid
    history), then open requests get a few seconds. ``announce`` gets the base URL once the
    socket is bound (port 0: any free port)."""
    sock = bind(host, port)
    try:
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{sock.getsockname()[1]}"
        server = server_for(make_app(url), before_shutdown=before_shutdown)
        if announce is not None:
            announce(url)
        await server.serve([sock])
    finally:
        sock.close()
