"""Running an ASGI app under uvicorn in this event loop, on a socket bound before it starts.

The server's connection limits come from an :class:`~simplellmfunc.serving.EdgePolicy`
through uvicorn's public config (``timeout_keep_alive``, ``limit_concurrency``,
``h11_max_incomplete_event_size``) and one protocol class: uvicorn's h11 protocol with a header
timeout, so a connection that sends no complete request head in time (an idle socket, a
slow-loris client) is closed.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from ._edge import EdgePolicy

__all__ = ["bind", "running", "serve_app", "server_for"]


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port).

    Its protocol is named (``IPPROTO_TCP``): asyncio sets ``TCP_NODELAY`` only on accepted
    sockets whose protocol says TCP, and without it every response written in two parts
    (head, then body) waited out the client's delayed ACK, 40 ms a request on Linux."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
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


def _protocol(header_timeout: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request head is not complete within
    ``header_timeout`` seconds of its opening or of the end of the previous response."""

    class HeaderTimeoutH11(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def _arm(self) -> None:
            self._disarm()
            self._header_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _head_timed_out(self) -> None:
            self._header_timer = None
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def handle_events(self) -> None:
            super().handle_events()
            if self.cycle is not None and not self.cycle.response_complete:
                self._disarm()  # a request is running: its head arrived

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutH11


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
    app: Any,
    *,
    before_shutdown: Hook | None = None,
    graceful_seconds: int = 10,
    policy: EdgePolicy | None = None,
) -> uvicorn.Server:
    """A uvicorn server for ``app``: on shutdown it calls ``before_shutdown`` (abort the running
    turns: their streams then end with a valid history), then waits ``graceful_seconds`` for
    open requests. ``policy`` gives the header and keep-alive timeouts, the connection cap and
    the largest request head (default: :class:`EdgePolicy`'s defaults)."""
    limits = policy or EdgePolicy()
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=graceful_seconds,
        access_log=False,
        http=_protocol(limits.header_timeout),
        timeout_keep_alive=limits.keep_alive_timeout,  # type: ignore[arg-type]  # a float works
        limit_concurrency=limits.max_connections,
        h11_max_incomplete_event_size=limits.max_header_bytes,
    )
    return _Server(config, before_shutdown)


@asynccontextmanager
async def running(
    make_app: Callable[[str], Any],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    before_shutdown: Hook | None = None,
    policy: EdgePolicy | None = None,
) -> AsyncIterator[str]:
    """Serve ``make_app(base_url)`` while the block runs; yields the base URL
    (``http://host:port``, known once the socket is bound). ``policy``: the connection limits
    (see :func:`server_for`)."""
    sock = bind(host, port)
    try:
        bound = sock.getsockname()[1]
        server = server_for(
            make_app(f"http://{host}:{bound}"), before_shutdown=before_shutdown, policy=policy
        )
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
    policy: EdgePolicy | None = None,
) -> None:
    """Serve ``make_app(base_url)`` on ``host:port`` until SIGINT / SIGTERM, then shut down
    gracefully: ``before_shutdown`` first (abort the running turns: each ends with a valid
    history), then open requests get a few seconds. ``announce`` gets the base URL once the
    socket is bound (port 0: any free port); ``policy``: the connection limits."""
    sock = bind(host, port)
    try:
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{sock.getsockname()[1]}"
        server = server_for(make_app(url), before_shutdown=before_shutdown, policy=policy)
        if announce is not None:
            announce(url)
        await server.serve([sock])
    finally:
        sock.close()
