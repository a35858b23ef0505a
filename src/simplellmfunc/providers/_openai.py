"""OpenAICompatible: any ``/chat/completions`` server, on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import httpx

from .._messages import AssistantMessage
from .._usage import Usage
from ..exceptions import (
    ProviderConnectionError,
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
            async for event in self._stream_once(request, deadline):
                started = True
                yield event
        except ProviderError as exc:
            rejected = exc.status == 400 and "stream_options" in str(exc)
            if started or not (self._stream_usage and rejected):
                raise
            self._stream_usage = False  # this server refuses include_usage: count locally
            async for event in self._stream_once(request, deadline):
                yield event

    async def _stream_once(
        self, request: LLMRequest, deadline: float
    ) -> AsyncIterator[StreamEvent]:
        async with self._http.open(
            "/chat/completions", self._body(request, True), deadline
        ) as response:
            state = _StreamState(self, request, response.headers.get("x-request-id"))
            async for event in state.events(response, deadline):
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

    async def events(self, response: httpx.Response, deadline: float) -> AsyncIterator[StreamEvent]:
        decoder = SSEDecoder()
        done = False
        async for chunk in _read_chunks(self.llm, response, deadline):
            for sse in decoder.feed(chunk):
                if sse.data == "[DONE]":
                    done = True
                    break
                for event in self._handle(sse.event, sse.data):
                    yield event
            if done:
                break
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
        delta = choice.get("delta") or {}
        if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
            self.reasoning.append(reasoning)
            out.append(ReasoningDelta(reasoning))
        if text := delta.get("content"):
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


def _decode_chunk(provider: str, event: str, data: str, request_id: str | None) -> dict[str, Any]:
    def fail(message: str) -> StreamError:
        return StreamError(
            f"{provider}: {message}", status=200, request_id=request_id, provider=provider
        )

    if event == "error":
        raise fail(f"error event in stream: {data[:300]}")
    try:
        chunk = json.loads(data)
    except ValueError:
        raise fail(f"malformed stream chunk: {data[:120]!r}") from None
    if not isinstance(chunk, dict):
        raise fail(f"stream chunk is not an object: {data[:120]!r}")
    if chunk.get("error"):
        raise fail(f"error in stream: {str(chunk['error'])[:300]}")
    return chunk


async def _read_chunks(
    llm: OpenAICompatible, response: httpx.Response, deadline: float
) -> AsyncIterator[bytes]:
    """Raw body chunks, each read under what is left of the call's deadline."""
    iterator = response.aiter_raw()
    while True:
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                chunk = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise ProviderTimeoutError(
                f"{llm.provider_name}: call deadline passed while streaming",
                provider=llm.provider_name,
            ) from None
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(
                f"{llm.provider_name}: stream broken: {type(exc).__name__}",
                status=200,
                provider=llm.provider_name,
            ) from exc
        yield chunk
