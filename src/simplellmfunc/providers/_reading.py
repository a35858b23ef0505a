"""Reading a response body within a call's deadline, chunk by chunk or whole."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import cast

import anyio
import httpx

__all__ = ["next_chunk", "read_all", "read_timeout"]


def read_timeout(response: httpx.Response) -> float | None:
    """The per-read timeout httpx applies to ``response``'s body (``None``: no limit)."""
    timeouts = response.request.extensions.get("timeout")
    value = timeouts.get("read") if isinstance(timeouts, dict) else None
    return float(value) if value is not None else None


async def next_chunk(
    body: AsyncIterator[bytes], deadline: float, read_limit: float | None
) -> bytes | None:
    """The next chunk of a response body, or ``None`` at its end, within the call's deadline.

    httpx already bounds each network read by ``read_limit``; while more time than that is left
    before the deadline, one read cannot pass it, so no cancel scope is needed. That matters on
    the hot path: a stream brings one chunk per event, and a scope costs about 10 µs. Closer to
    the deadline every read runs under a scope that ends exactly at it (at once, if a slow drip
    already took the call past it).

    Raises:
        TimeoutError: When the deadline passes.
        httpx.HTTPError: When the connection fails.
    """
    if read_limit is not None and deadline - anyio.current_time() > read_limit:
        return await anext(body, None)
    with anyio.CancelScope(deadline=deadline):
        return await anext(body, None)
    raise TimeoutError  # reached only when the scope cancelled the read


async def read_all(response: httpx.Response, deadline: float) -> bytes:
    """The whole (decoded) body of ``response``, read within the deadline.

    Raises:
        TimeoutError: When the deadline passes.
        httpx.HTTPError: When the connection fails.
    """
    body = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())
    limit = read_timeout(response)
    parts = []
    try:
        while (part := await next_chunk(body, deadline, limit)) is not None:
            parts.append(part)
    finally:
        await body.aclose()
    return b"".join(parts)
