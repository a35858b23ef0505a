"""The stream driver of every HTTP provider: body chunks in, stream events out.

An adapter's :class:`StreamParser` knows its wire events; everything else a stream needs is here,
once: reading the body under the call's deadline (with a fast path for the hot loop), reading
what follows the terminal event so the connection goes back to the pool, and turning transport
failures into :class:`~simplellmfunc.exceptions.ProviderError` subclasses.
:meth:`HTTPInterface.stream <simplellmfunc.providers.HTTPInterface.stream>` drives it.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import Final, Protocol, cast

import anyio
import httpx

from ..exceptions import ProviderTimeoutError, StreamError
from ._base import LLMResponse, StreamEvent
from ._reading import next_chunk

__all__ = ["StreamParser", "body_chunks", "next_events", "stream_error"]

_DRAIN_SECONDS: Final = 1.0


class StreamParser(Protocol):
    """The wire half of a stream: one adapter's events in, stream events and the reply out.

    Attributes:
        provider: Label for errors.
        request_id: The provider's request id, for errors.
    """

    provider: str
    request_id: str | None

    @property
    def done(self) -> bool:
        """Whether the terminal event arrived (whatever follows it is not parsed)."""
        ...

    def feed_bytes(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events completed by ``chunk`` (a piece of the body, split anywhere).

        Raises:
            StreamError: For an error event or a malformed one.
        """
        ...

    def response(self) -> LLMResponse:
        """The assembled reply, once the body is over (``usage.calls == 0``: none reported).

        Raises:
            StreamError: When the stream ended before the reply was complete.
        """
        ...


def stream_error(
    provider: str, message: str, request_id: str | None, *, retryable: bool = False
) -> StreamError:
    """A :class:`StreamError` of a stream whose 200 response had arrived."""
    return StreamError(
        f"{provider}: {message}",
        status=200,
        request_id=request_id,
        retryable=retryable,
        provider=provider,
    )


def body_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's chunks; raw when the server applied no ``Content-Encoding`` (one generator
    less per chunk), decoded otherwise (some proxies gzip even event streams).

    The caller closes the generator (``await chunks.aclose()``).
    """
    chunks = response.aiter_raw() if "content-encoding" not in response.headers else None
    # httpx types these as AsyncIterator, but they are async generators: the caller closes
    # them, or the loop's finalizer hook would, later, in a task of its own.
    return cast("AsyncGenerator[bytes, None]", chunks or response.aiter_bytes())


async def next_events(
    body: AsyncGenerator[bytes, None],
    parser: StreamParser,
    deadline: float,
    limit: float | None,
    target: str,
) -> list[StreamEvent] | None:
    """Read chunks until one carries events; ``None`` once the stream is over.

    ``limit`` is httpx's per-read timeout (see :func:`~._reading.read_timeout`); ``target`` the
    server's ``scheme://host:port``, which errors name. After the
    terminal event the rest of the body (normally only the chunked encoding's end) is read, so
    the connection goes back to the pool.

    Raises:
        ProviderTimeoutError: When the call's deadline passes.
        StreamError: When the stream breaks (retryable) or carries an error (the parser's).
    """
    while not parser.done:
        try:
            if limit is not None and deadline - anyio.current_time() > limit:
                chunk = await anext(body, None)  # next_chunk's fast path, inlined: hot loop
            else:
                chunk = await next_chunk(body, deadline, None)
        except TimeoutError:
            raise ProviderTimeoutError(
                f"{parser.provider}: call deadline passed while streaming from {target}",
                status=200,
                request_id=parser.request_id,
                provider=parser.provider,
            ) from None
        except httpx.HTTPError as exc:
            # The response had arrived: a broken stream, which a new call may not hit.
            message = f"stream broken: {type(exc).__name__} (from {target})"
            raise stream_error(parser.provider, message, parser.request_id, retryable=True) from exc
        if chunk is None:
            return None
        if events := parser.feed_bytes(chunk):
            return events
    await _drain(body, deadline)
    return None


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what follows the terminal event (normally only the end of the chunked body).

    A fully read response returns its connection to the pool for keep-alive; one closed early
    costs a new connection on the next call. A server that keeps talking after the end gets a
    short grace period, then the connection is dropped.
    """
    with anyio.CancelScope(deadline=min(deadline, anyio.current_time() + _DRAIN_SECONDS)):
        try:
            async for _ in chunks:
                pass
        except httpx.HTTPError:
            pass  # the reply is complete; the connection is simply not reused
