"""OpenAICompatible: any ``/chat/completions`` server, on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Protocol, cast

import anyio
import httpx

from ...exceptions import (
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from .._base import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    UsageEvent,
)
from .._http import next_chunk, read_timeout
from .._http_interface import HTTPInterface
from ._wire import ChatStreamParser, build_chat_body, parse_chat_response, stream_error

__all__ = ["OpenAICompatible"]

_DRAIN_SECONDS = 1.0
_PATH = "/chat/completions"


class OpenAICompatible(HTTPInterface):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Takes the arguments of :class:`HTTPInterface`: ``(api_key_pool, model_name, base_url,
    *, max_retries, retry_policy, timeout, connect_timeout, read_timeout, max_connections,
    rate_limit_capacity, rate_limit_refill_rate, rate_limit, capabilities, context_window,
    headers, provider_name, http_client, **default_params)``.

    Raises:
        ConfigError: For an empty key list.
    """

    #: Whether to ask for ``stream_options.include_usage``; ``None`` until a server refuses it.
    _stream_usage: bool | None = None

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_chat_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            include_usage=self._include_usage(),
            defaults=self.default_params,
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request without streaming.

        Raises:
            ProviderError: (a subclass) when the call fails after retries.
        """
        deadline = self._http.deadline(request.timeout)
        data, headers = await self._http.post_json(_PATH, self._body(request, False), deadline)
        request_id = headers.get("x-request-id")
        if "error" in data and not data.get("choices"):
            raise StreamError(
                f"{self.provider_name}: error in a 200 response: {str(data['error'])[:300]}",
                status=200,
                request_id=request_id,
                provider=self.provider_name,
            )
        response = parse_chat_response(data, self.provider_name, request_id)
        if response is None:
            raise ProviderError(
                f"{self.provider_name}: response has no choices",
                status=200,
                request_id=request_id,
                body_excerpt=json.dumps(data)[:300],
                provider=self.provider_name,
            )
        if response.usage.calls == 0:
            response = await self._with_estimate(request, response)
        return response

    def _include_usage(self) -> bool:
        return self.capabilities.stream_usage if self._stream_usage is None else self._stream_usage

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request streaming (SSE); the last event is a :class:`FinishEvent`.

        Raises:
            ProviderError: (a subclass) when the call fails; never retried after the first event.
        """
        deadline = self._http.deadline(request.timeout)
        started = False
        while True:
            asked_usage = self._include_usage()
            try:
                async with self._http.open(_PATH, self._body(request, True), deadline) as response:
                    parser = ChatStreamParser(
                        self.provider_name, response.headers.get("x-request-id")
                    )
                    body, limit = _body_chunks(response), read_timeout(response)
                    try:
                        while events := await _next_events(body, parser, deadline, limit):
                            for event in events:
                                started = True
                                yield event
                    finally:
                        await body.aclose()
                    final = parser.response()
                # The connection and the key are back in their pools before the last events.
                if parser.usage is None:
                    final = await self._with_estimate(request, final)
                else:
                    yield UsageEvent(parser.usage)
                yield FinishEvent(final)
                return
            except ProviderError as exc:
                rejected = exc.status == 400 and "stream_options" in str(exc)
                if started or not (asked_usage and rejected):
                    raise
                self._stream_usage = False  # this server refuses include_usage: count locally


# Kept under these names for the other adapters that share them.
_stream_error = stream_error


def _body_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's chunks; raw when the server applied no ``Content-Encoding`` (one generator
    less per chunk), decoded otherwise (some proxies gzip even event streams)."""
    chunks = response.aiter_raw() if "content-encoding" not in response.headers else None
    # httpx types these as AsyncIterator, but they are async generators: the caller closes
    # them, or the loop's finalizer hook would, later, in a task of its own.
    return cast("AsyncGenerator[bytes, None]", chunks or response.aiter_bytes())


class StreamParser(Protocol):
    """What :func:`next_events` needs of an adapter's stream parser."""

    provider: str
    request_id: str | None

    @property
    def done(self) -> bool:
        """Whether the terminal event arrived."""
        ...

    def feed_bytes(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events completed by ``chunk``."""
        ...


async def _next_events(
    body: AsyncGenerator[bytes, None],
    parser: StreamParser,
    deadline: float,
    limit: float | None,
) -> list[StreamEvent] | None:
    """Read chunks until one carries events; ``None`` once the stream is over.

    After ``[DONE]`` the rest of the body (normally only the chunked encoding's end) is read,
    so the connection goes back to the pool.

    Raises:
        ProviderTimeoutError: When the call's deadline passes.
        StreamError: When the stream breaks or carries an error (see :class:`ChatStreamParser`).
    """
    while not parser.done:
        try:
            if limit is not None and deadline - anyio.current_time() > limit:
                chunk = await anext(body, None)  # next_chunk's fast path, inlined: hot loop
            else:
                chunk = await next_chunk(body, deadline, None)
        except TimeoutError:
            raise ProviderTimeoutError(
                f"{parser.provider}: call deadline passed while streaming",
                status=200,
                request_id=parser.request_id,
                provider=parser.provider,
            ) from None
        except httpx.HTTPError as exc:
            # The response had arrived: a broken stream, which a new call may not hit.
            message = f"stream broken: {type(exc).__name__}"
            raise stream_error(parser.provider, message, parser.request_id, retryable=True) from exc
        if chunk is None:
            return None
        if events := parser.feed_bytes(chunk):
            return events
    await _drain(body, deadline)
    return None


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what follows ``[DONE]`` (normally only the end of the chunked body).

    A fully read response returns its connection to the pool for keep-alive; one closed early
    costs a new connection on the next call. A server that keeps talking after ``[DONE]`` gets a
    short grace period, then the connection is dropped.
    """
    with anyio.CancelScope(deadline=min(deadline, anyio.current_time() + _DRAIN_SECONDS)):
        try:
            async for _ in chunks:
                pass
        except httpx.HTTPError:
            pass  # the reply is complete; the connection is simply not reused
