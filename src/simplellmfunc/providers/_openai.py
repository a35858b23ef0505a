"""OpenAICompatible: any ``/chat/completions`` server, on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import anyio
import httpx

from .._usage import Usage
from ..exceptions import (
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from ._base import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    UsageEvent,
)
from ._http import HTTPSettings, HTTPTransport, next_chunk, read_timeout
from ._keys import APIKeyPool
from ._openai_wire import ChatStreamParser, build_chat_body, parse_chat_response, stream_error
from ._ratelimit import TokenBucket
from ._redact import fingerprint
from ._retry import RetryPolicy
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["OpenAICompatible"]

_DRAIN_SECONDS = 1.0
_PATH = "/chat/completions"


def _pool(keys: str | Sequence[str] | APIKeyPool | None, provider: str) -> APIKeyPool | None:
    if keys is None or isinstance(keys, APIKeyPool):
        return keys
    return APIKeyPool(keys, provider)


class OpenAICompatible(LLMInterface):
    """A model behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root, e.g. ``https://api.openai.com/v1``.
        max_retries: Retries after the first attempt (see :class:`RetryPolicy`).
        retry_policy: Full retry settings (overrides ``max_retries``).
        timeout: Overall deadline per call in seconds (retries and streaming included).
        connect_timeout: Seconds to connect.
        read_timeout: Seconds to wait for each chunk.
        rate_limit_capacity: Token-bucket capacity (with ``rate_limit_refill_rate``);
            ``None`` disables client-side rate limiting.
        rate_limit_refill_rate: Requests per second refilled.
        rate_limit: A :class:`TokenBucket` to use (overrides the two above).
        capabilities: What the server supports (defaults: everything).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers.
        provider_name: Label used in events and errors.
        **default_params: Body parameters sent with every call (``temperature`` ...).

    Raises:
        ConfigError: For an empty key list.
    """

    def __init__(
        self,
        api_key_pool: str | Sequence[str] | APIKeyPool | None,
        model_name: str,
        base_url: str = "https://api.openai.com/v1",
        *,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_connections: int = 1000,
        rate_limit_capacity: float | None = None,
        rate_limit_refill_rate: float = 1.0,
        rate_limit: TokenBucket | None = None,
        capabilities: Capabilities | None = None,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        provider_name: str = "openai",
        http_client: httpx.AsyncClient | None = None,
        **default_params: Any,
    ) -> None:
        self.model_name = model_name
        self.provider_name = provider_name
        self.capabilities = capabilities or Capabilities()
        self.context_window = context_window
        self.default_params = dict(default_params)
        if rate_limit is None and rate_limit_capacity is not None:
            rate_limit = TokenBucket(rate_limit_capacity, rate_limit_refill_rate)
        self._stream_usage = self.capabilities.stream_usage
        self._http = HTTPTransport(
            base_url=base_url,
            keys=_pool(api_key_pool, provider_name),
            auth=lambda key: {"authorization": f"Bearer {key}"},
            provider=provider_name,
            retry=retry_policy or RetryPolicy(max_retries=max_retries),
            settings=HTTPSettings(timeout, connect_timeout, read_timeout, max_connections),
            rate_limit=rate_limit,
            headers=headers,
            client=http_client,
        )

    @property
    def base_url(self) -> str:
        """The API root."""
        return self._http.base_url

    @property
    def key_pool(self) -> APIKeyPool | None:
        """The key pool (never log its keys)."""
        return self._http.keys

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        return build_chat_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            include_usage=self._stream_usage,
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

    async def _with_estimate(self, request: LLMRequest, response: LLMResponse) -> LLMResponse:
        """Count usage locally (the server reported none); tiktoken's first load is slow, so
        counting runs in a worker thread."""
        text = response.text + "".join(c.name + c.arguments for c in response.message.tool_calls)

        def count() -> tuple[int, int]:
            return (
                count_message_tokens(request.messages, self.model_name),
                count_text_tokens(text, self.model_name),
            )

        prompt, completion = await anyio.to_thread.run_sync(count)
        usage = Usage(prompt, completion, prompt + completion, calls=1, estimated=True)
        return replace(response, usage=usage)

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request streaming (SSE); the last event is a :class:`FinishEvent`.

        Raises:
            ProviderError: (a subclass) when the call fails; never retried after the first event.
        """
        deadline = self._http.deadline(request.timeout)
        started = False
        while True:
            asked_usage = self._stream_usage
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

    def __repr__(self) -> str:
        pool = self._http.keys
        keys = ",".join(fingerprint(k) for k in pool.keys) if pool else "-"
        return (
            f"OpenAICompatible(model={self.model_name!r}, base_url={self.base_url!r}, "
            f"keys=[{keys}])"
        )

    @classmethod
    def load_from_json_file(cls, path: str | Path) -> dict[str, dict[str, OpenAICompatible]]:
        """Load interfaces from a SimpleLLMFunc ``provider.json``.

        The file maps provider names to lists of ``{"model_name", "api_keys", "base_url", ...}``
        entries; the result maps provider → model name → interface.

        Raises:
            ConfigError: For a missing, unreadable or malformed file, naming what is wrong.
        """
        from ._config import load_provider_json

        return load_provider_json(cls, path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OpenAICompatible:
        """Build the interface from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``OPENAI_MODEL``.

        Values come from ``environ`` (default: the process environment over ``./.env``).

        Raises:
            ConfigError: If no model or key is configured.
        """
        from ._config import openai_from_env

        return openai_from_env(cls, environ)


# Kept under these names for the other adapters that share them.
_stream_error = stream_error


def _body_chunks(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's chunks; raw when the server applied no ``Content-Encoding`` (one generator
    less per chunk), decoded otherwise (some proxies gzip even event streams)."""
    chunks = response.aiter_raw() if "content-encoding" not in response.headers else None
    # httpx types these as AsyncIterator, but they are async generators: the caller closes
    # them, or the loop's finalizer hook would, later, in a task of its own.
    return cast("AsyncGenerator[bytes, None]", chunks or response.aiter_bytes())


async def _next_events(
    body: AsyncGenerator[bytes, None],
    parser: ChatStreamParser,
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
