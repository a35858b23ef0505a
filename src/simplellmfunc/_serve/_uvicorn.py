"""Running an ASGI app under uvicorn in this event loop, on a socket bound before it starts."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn

__all__ = ["bind", "running"]


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


def server_for(app: Any, *, graceful_seconds: float = 10.0) -> uvicorn.Server:
    """A uvicorn server for ``app`` that waits ``graceful_seconds`` for open requests on
    shutdown (the app's lifespan aborts running turns first)."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=graceful_seconds,
        access_log=False,
    )
    return uvicorn.Server(config)


@asynccontextmanager
async def running(
    make_app: Callable[[str], Any], host: str = "127.0.0.1", port: int = 0
) -> AsyncIterator[str]:
    """Serve ``make_app(base_url)`` while the block runs; yields the base URL
    (``http://host:port``, known once the socket is bound)."""
    sock = bind(host, port)
    try:
        bound = sock.getsockname()[1]
        server = server_for(make_app(f"http://{host}:{bound}"))
        async with anyio.create_task_group() as group:
            group.start_soon(server.serve, [sock])
            try:
                yield f"http://{host}:{bound}"
            finally:
                server.should_exit = True
    finally:
        sock.close()
