"""OpenAICompatible: any ``/chat/completions`` server, on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import anyio
import httpx

from .._messages import AssistantMessage
from .._usage import Usage
from ..exceptions import (
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from ._assembly import ToolCallAssembler
from ._base import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    UsageEvent,
)
from ._http import HTTPSettings, HTTPTransport
from ._keys import APIKeyPool
from ._openai_wire import build_chat_body, parse_chat_response, reasoning_details
from ._ratelimit import TokenBucket
from ._redact import fingerprint
from ._retry import RetryPolicy
from ._sse import SSEDecoder
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["OpenAICompatible"]

_DRAIN_SECONDS = 1.0


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
        data, headers = await self._http.post_json(
            "/chat/completions", self._body(request, False), deadline
        )
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
        try:
            async with aclosing(self._stream_once(request, deadline)) as events:
                async for event in events:
                    started = True
                    yield event
        except ProviderError as exc:
            rejected = exc.status == 400 and "stream_options" in str(exc)
            if started or not (self._stream_usage and rejected):
                raise
            self._stream_usage = False  # this server refuses include_usage: count locally
            async with aclosing(self._stream_once(request, deadline)) as events:
                async for event in events:
                    yield event

    async def _stream_once(
        self, request: LLMRequest, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        async with self._http.open(
            "/chat/completions", self._body(request, True), deadline
        ) as response:
            state = _StreamState(self, request, response.headers.get("x-request-id"))
            async with aclosing(state.events(response, deadline)) as events:
                async for event in events:
                    yield event

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


class _StreamState:
    """Turns SSE chunks into stream events and assembles the final response."""

    def __init__(self, llm: OpenAICompatible, request: LLMRequest, request_id: str | None):
        self.llm = llm
        self.request = request
        self.request_id = request_id
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools = ToolCallAssembler()
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.model = ""

    async def events(
        self, response: httpx.Response, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        decoder = SSEDecoder()
        done = False
        async with aclosing(_read_chunks(self.llm, response, deadline)) as chunks:
            async for chunk in chunks:
                for sse in decoder.feed(chunk):
                    if sse.data == "[DONE]":
                        done = True
                        break
                    for event in self._handle(sse.event, sse.data):
                        yield event
                if done:
                    break
            if done:
                await _drain(chunks, deadline)
        if not done and self.finish_reason is None:
            raise StreamError(
                f"{self.llm.provider_name}: stream ended before the reply was complete",
                status=200,
                request_id=self.request_id,
                provider=self.llm.provider_name,
            )
        final = await self._response()
        if self.usage is not None:
            yield UsageEvent(self.usage)
        yield FinishEvent(final)

    def _handle(self, event: str, data: str) -> list[StreamEvent]:
        chunk = _decode_chunk(self.llm.provider_name, event, data, self.request_id)
        out: list[StreamEvent] = []
        if isinstance(chunk.get("usage"), dict):
            self.usage = Usage.from_openai(chunk["usage"])
        self.model = chunk.get("model") or self.model
        choices = chunk.get("choices") or ()
        if not choices:
            return out
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            if choice.get("finish_reason") if isinstance(choice, dict) else False:
                self.finish_reason = choice["finish_reason"]
                return out
            raise _stream_error(self.llm.provider_name, "chunk without a delta", self.request_id)
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            self.reasoning.append(reasoning)
            out.append(ReasoningDelta(reasoning))
        text = delta.get("content")
        if text and isinstance(text, str):
            self.text.append(text)
            out.append(TextDelta(text))
        for raw_call in delta.get("tool_calls") or ():
            normalized = self.tools.add(raw_call)
            if normalized is not None:
                out.append(normalized)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        return out

    async def _response(self) -> LLMResponse:
        message = AssistantMessage(
            "".join(self.text) or None,
            self.tools.finish(),
            reasoning_details("".join(self.reasoning)),
        )
        response = LLMResponse(
            message=message,
            finish_reason=self.finish_reason,
            usage=self.usage or Usage(),
            model=self.model,
            request_id=self.request_id,
            provider=self.llm.provider_name,
        )
        if self.usage is None:
            response = await self.llm._with_estimate(self.request, response)
        return response


def _stream_error(
    provider: str, message: str, request_id: str | None, *, retryable: bool = False
) -> StreamError:
    return StreamError(
        f"{provider}: {message}",
        status=200,
        request_id=request_id,
        retryable=retryable,
        provider=provider,
    )


def _decode_chunk(provider: str, event: str, data: str, request_id: str | None) -> dict[str, Any]:
    if event == "error":
        raise _stream_error(provider, f"error event in stream: {data[:300]}", request_id)
    try:
        chunk = json.loads(data)
    except ValueError:
        message = f"malformed stream chunk: {data[:120]!r}"
        raise _stream_error(provider, message, request_id) from None
    if not isinstance(chunk, dict):
        raise _stream_error(provider, f"stream chunk is not an object: {data[:120]!r}", request_id)
    if chunk.get("error"):
        raise _stream_error(provider, f"error in stream: {str(chunk['error'])[:300]}", request_id)
    return chunk


async def _read_chunks(
    llm: OpenAICompatible, response: httpx.Response, deadline: float
) -> AsyncGenerator[bytes, None]:
    """Decoded body chunks, each read under what is left of the call's deadline.

    ``aiter_bytes`` (not ``aiter_raw``) undoes a ``Content-Encoding`` such as gzip, which some
    proxies apply even to event streams.
    """
    # httpx types it as an AsyncIterator, but it is an async generator: close it here, or the
    # loop's finalizer hook closes it later in a task of its own.
    body = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())
    async with aclosing(body) as iterator:
        while True:
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                    chunk = await anext(iterator)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise ProviderTimeoutError(
                    f"{llm.provider_name}: call deadline passed while streaming",
                    status=200,
                    request_id=response.headers.get("x-request-id"),
                    provider=llm.provider_name,
                ) from None
            except httpx.HTTPError as exc:
                # The response had arrived: a broken stream, which a new call may not hit.
                raise _stream_error(
                    llm.provider_name,
                    f"stream broken: {type(exc).__name__}",
                    response.headers.get("x-request-id"),
                    retryable=True,
                ) from exc
            yield chunk


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what follows ``[DONE]`` (normally only the end of the chunked body).

    A fully read response returns its connection to the pool for keep-alive; one closed early
    costs a new connection on the next call. A server that keeps talking after ``[DONE]`` gets a
    short grace period, then the connection is dropped.
    """
    with anyio.move_on_after(min(_DRAIN_SECONDS, max(deadline - anyio.current_time(), 0))):
        async for _ in chunks:
            pass
