"""AnthropicCompatible: the Anthropic Messages API (``/v1/messages``) on httpx, without the SDK."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

import anyio
import httpx

from .._messages import Message
from .._usage import Usage
from ..exceptions import ProviderError
from ._anthropic_stream import MessagesStream, error_event, request_id
from ._anthropic_wire import build_messages_body, parse_messages_response, wire_messages
from ._base import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    UsageEvent,
)
from ._http import HTTPSettings, HTTPTransport
from ._keys import APIKeyPool
from ._ratelimit import TokenBucket
from ._redact import fingerprint
from ._retry import RetryPolicy
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["AnthropicCompatible"]

logger = logging.getLogger("simplellmfunc.providers")

DEFAULT_CAPABILITIES: Final = Capabilities(json_schema=False)
_NOT_OFFERED: Final = frozenset({404, 405, 501})  # count_tokens: the server has no such endpoint


class AnthropicCompatible(LLMInterface):
    """A model behind the Anthropic Messages API (api.anthropic.com or a compatible server).

    Sends ``x-api-key`` and ``anthropic-version``; 429, 5xx and 529 (overloaded) are retried with
    the SDK's backoff. Structured output goes through a prompt contract (``json_schema`` is off).

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root, e.g. ``https://api.anthropic.com/v1``.
        max_tokens: The reply budget sent with every call (the API requires one); a
            ``max_tokens`` in the call's params or in ``default_params`` wins.
        anthropic_version: The ``anthropic-version`` header.
        max_retries: Retries after the first attempt (see :class:`RetryPolicy`).
        retry_policy: Full retry settings (overrides ``max_retries``).
        timeout: Overall deadline per call in seconds (retries and streaming included).
        connect_timeout: Seconds to connect.
        read_timeout: Seconds to wait for each chunk.
        max_connections: Connection pool size.
        rate_limit_capacity: Token-bucket capacity (with ``rate_limit_refill_rate``);
            ``None`` disables client-side rate limiting.
        rate_limit_refill_rate: Requests per second refilled.
        rate_limit: A :class:`TokenBucket` to use (overrides the two above).
        capabilities: What the server supports (default: everything but ``json_schema``).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers (e.g. ``anthropic-beta``).
        provider_name: Label used in events and errors.
        http_client: An ``httpx.AsyncClient`` to borrow (left open by :meth:`aclose`).
        **default_params: Body parameters sent with every call (``temperature``, ``thinking``...).

    Raises:
        ConfigError: For an empty key list.
    """

    def __init__(
        self,
        api_key_pool: str | Sequence[str] | APIKeyPool | None,
        model_name: str,
        base_url: str = "https://api.anthropic.com/v1",
        *,
        max_tokens: int = 4096,
        anthropic_version: str = "2023-06-01",
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
        provider_name: str = "anthropic",
        http_client: httpx.AsyncClient | None = None,
        **default_params: Any,
    ) -> None:
        self.model_name = model_name
        self.provider_name = provider_name
        self.capabilities = capabilities or DEFAULT_CAPABILITIES
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.default_params = dict(default_params)
        self._count_endpoint = True  # until the server says it has no count_tokens
        if rate_limit is None and rate_limit_capacity is not None:
            rate_limit = TokenBucket(rate_limit_capacity, rate_limit_refill_rate)
        keys = api_key_pool
        if keys is not None and not isinstance(keys, APIKeyPool):
            keys = APIKeyPool(keys, provider_name)
        self._http = HTTPTransport(
            base_url=base_url,
            keys=keys,
            auth=lambda key: {"x-api-key": key},
            provider=provider_name,
            retry=retry_policy or RetryPolicy(max_retries=max_retries),
            settings=HTTPSettings(timeout, connect_timeout, read_timeout, max_connections),
            rate_limit=rate_limit,
            headers={"anthropic-version": anthropic_version, **(headers or {})},
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
        return build_messages_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            max_tokens=self.max_tokens,
            defaults=self.default_params,
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request without streaming.

        Raises:
            ProviderError: (a subclass) when the call fails after retries.
        """
        deadline = self._http.deadline(request.timeout)
        data, headers = await self._http.post_json(
            "/messages", self._body(request, False), deadline
        )
        rid = request_id(headers)
        if data.get("type") == "error":
            raise error_event(self.provider_name, data, rid)
        response = parse_messages_response(data, self.provider_name, rid)
        if response is None:
            raise ProviderError(
                f"{self.provider_name}: response has no content",
                status=200,
                request_id=rid,
                body_excerpt=json.dumps(data)[:300],
                provider=self.provider_name,
            )
        if response.usage.calls == 0:
            response = await self._with_estimate(request, response)
        return response

    async def _with_estimate(self, request: LLMRequest, response: LLMResponse) -> LLMResponse:
        """Count usage locally (the server reported none), in a worker thread: tiktoken's first
        load is slow."""
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
        async with self._http.open("/messages", self._body(request, True), deadline) as response:
            state = MessagesStream(self.provider_name, request_id(response.headers))
            async with aclosing(state.events(response, deadline)) as events:
                async for event in events:
                    yield event
        final = state.response()
        if final.usage.calls == 0:
            final = await self._with_estimate(request, final)
        else:
            yield UsageEvent(final.usage)
        yield FinishEvent(final)

    async def count_tokens(self, messages: Sequence[Message]) -> int:
        """Count prompt tokens with ``POST /messages/count_tokens`` when the server offers it.

        A server without the endpoint (404, 405, 501) is remembered and the local tiktoken
        estimate used from then on; any other failure falls back to the estimate for this call.
        """
        system, turns = wire_messages(messages)
        if self._count_endpoint and turns:
            body: dict[str, Any] = {"model": self.model_name, "messages": turns}
            if system is not None:
                body["system"] = system
            try:
                data, _ = await self._http.post_json(
                    "/messages/count_tokens", body, self._http.deadline(None)
                )
            except ProviderError as exc:
                if exc.status in _NOT_OFFERED:
                    self._count_endpoint = False
                logger.info("%s: count_tokens failed (%s); estimating", self.provider_name, exc)
            else:
                count = data.get("input_tokens")
                if isinstance(count, int) and not isinstance(count, bool):
                    return count
        return await super().count_tokens(messages)

    def __repr__(self) -> str:
        pool = self._http.keys
        keys = ",".join(fingerprint(k) for k in pool.keys) if pool else "-"
        return (
            f"AnthropicCompatible(model={self.model_name!r}, base_url={self.base_url!r}, "
            f"keys=[{keys}])"
        )

    @classmethod
    def load_from_json_file(cls, path: str | Path) -> dict[str, dict[str, AnthropicCompatible]]:
        """Load interfaces from a SimpleLLMFunc ``provider.json`` (same format as
        :meth:`OpenAICompatible.load_from_json_file`; extra entry keys such as ``max_tokens``
        become constructor arguments).

        Raises:
            ConfigError: For a missing, unreadable or malformed file, naming what is wrong.
        """
        from ._config import load_provider_json

        return load_provider_json(cls, path)
