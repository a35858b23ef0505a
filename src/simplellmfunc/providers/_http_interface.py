"""HTTPInterface: what every HTTP provider shares (settings, keys, rate limit, lifecycle, the
``complete`` and ``stream`` calls, usage estimates, loading from provider.json and the
environment). Adapters add the wire format: a request body, a reply parser and a stream parser."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, Self

import anyio.to_thread
import httpx

from .._usage import Usage
from ..exceptions import EmptyReplyError, ProviderError, UserError
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
from ._reading import read_timeout
from ._redact import fingerprint
from ._reply import check_reply, is_json, reply_events
from ._retry import RetryPolicy
from ._stream import StreamParser, body_chunks, next_events
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["HTTPInterface"]


class HTTPInterface(LLMInterface):
    """Base of the HTTP providers; one ``httpx.AsyncClient`` per interface.

    :meth:`complete` and :meth:`stream` are written once, here; an adapter sets
    :attr:`endpoint_path` and implements :meth:`_body` (the request), :meth:`_parse_reply` (a
    non-streamed reply) and :meth:`_stream_parser` (its wire events, see
    :class:`~simplellmfunc.providers._stream.StreamParser`).

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root (default: the adapter's public endpoint).
        max_retries: Retries after the first attempt (see :class:`RetryPolicy`).
        retry_policy: Full retry settings (overrides ``max_retries``).
        http: The connection settings as one value (:class:`HTTPSettings`: timeouts, pool
            size), or the four flat keywords below (not both).
        timeout: Overall deadline per call in seconds (retries and streaming included;
            default 600).
        connect_timeout: Seconds to connect (default 10).
        read_timeout: Seconds to wait for each chunk (default 120).
        max_connections: Connection pool size (HTTP/1.1 keep-alive; default 100).
        rate_limit_capacity: Token-bucket capacity (with ``rate_limit_refill_rate``);
            ``None`` disables client-side rate limiting.
        rate_limit_refill_rate: Requests per second refilled.
        rate_limit: A :class:`TokenBucket` to use (overrides the two above).
        capabilities: What the server supports (default: the adapter's).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers.
        provider_name: Label used in events and errors.
        http_client: An ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).
        **default_params: Body parameters sent with every call (``temperature`` ...).

    Raises:
        ConfigError: For an empty key list.
        UserError: For ``http=`` given together with a flat connection keyword.
    """

    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    default_provider_name: ClassVar[str] = "openai"
    default_capabilities: ClassVar[Capabilities] = Capabilities()
    env_prefix: ClassVar[str] = "OPENAI"
    #: The endpoint below ``base_url`` that :meth:`complete` and :meth:`stream` POST to.
    endpoint_path: ClassVar[str] = ""
    #: Response headers that carry the provider's request id, in order of preference.
    request_id_headers: ClassVar[tuple[str, ...]] = ("x-request-id",)

    def __init__(
        self,
        api_key_pool: str | Sequence[str] | APIKeyPool | None,
        model_name: str,
        base_url: str | None = None,
        *,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        http: HTTPSettings | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        max_connections: int | None = None,
        rate_limit_capacity: float | None = None,
        rate_limit_refill_rate: float = 1.0,
        rate_limit: TokenBucket | None = None,
        capabilities: Capabilities | None = None,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        provider_name: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        **default_params: object,
    ) -> None:
        self.model_name = model_name
        self.provider_name = provider_name or self.default_provider_name
        self.capabilities = capabilities or self.default_capabilities
        self.context_window = context_window
        self.default_params = dict(default_params)
        if rate_limit is None and rate_limit_capacity is not None:
            rate_limit = TokenBucket(rate_limit_capacity, rate_limit_refill_rate)
        keys = api_key_pool
        if keys is not None and not isinstance(keys, APIKeyPool):
            keys = APIKeyPool(keys, self.provider_name)
        self._http = HTTPTransport(
            base_url=base_url or self.default_base_url,
            keys=keys,
            auth=self._auth_headers,
            provider=self.provider_name,
            retry=retry_policy or RetryPolicy(max_retries=max_retries),
            settings=_settings(http, timeout, connect_timeout, read_timeout, max_connections),
            rate_limit=rate_limit,
            headers={**self._fixed_headers(), **(headers or {})},
            client=http_client,
        )

    def _auth_headers(self, key: str) -> Mapping[str, str]:
        """The headers that carry ``key`` (bearer token by default). Called once per key: the
        transport keeps the headers for the key's later requests."""
        return {"authorization": f"Bearer {key}"}

    def _fixed_headers(self) -> Mapping[str, str]:
        """Headers every request carries (e.g. an API version)."""
        return {}

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

    # -- the wire format: what an adapter implements ----------------------------------------------

    def _body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        """The JSON body of a call."""
        raise NotImplementedError(f"{type(self).__name__} must implement _body")

    def _parse_reply(self, data: dict[str, Any], request_id: str | None) -> LLMResponse:
        """A non-streamed reply (``usage.calls == 0`` when the server reported none).

        Raises:
            ProviderError: (a subclass) when ``data`` is an error or not a reply.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement _parse_reply")

    def _stream_parser(self, request_id: str | None) -> StreamParser:
        """A parser for the events of one streamed reply."""
        raise NotImplementedError(f"{type(self).__name__} must implement _stream_parser")

    def _retry_refused(self, error: ProviderError, body: Mapping[str, object]) -> bool:
        """Whether to send a stream request again after the server refused ``body`` with
        ``error`` (before any event). An adapter that says yes changes what :meth:`_body`
        sends next; by default a refusal is final."""
        return False

    def _request_id(self, headers: httpx.Headers) -> str | None:
        for name in self.request_id_headers:
            if value := headers.get(name):
                return str(value)
        return None

    # -- the calls ---------------------------------------------------------------------------------

    def _wire_body(self, request: LLMRequest, stream: bool) -> dict[str, Any]:
        body = self._body(request, stream)
        # The call decides how the reply comes: a ``stream`` body parameter never does.
        if stream:
            body["stream"] = True
        else:
            body.pop("stream", None)
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request without streaming (a ``stream`` body parameter is ignored).

        An empty reply (no text, no tool calls, no reasoning) is retried like a 5xx.

        Raises:
            ProviderError: (a subclass) when the call fails after retries, or the reply is an
                error (a :class:`StreamError` for an error object in a 200 response).
            EmptyReplyError: When the replies stay empty, or the finish reason says why.
        """
        deadline = self._http.deadline(request.timeout)

        def body() -> dict[str, Any]:  # built once a connection slot is free
            return self._wire_body(request, False)

        def parse(data: dict[str, Any], headers: httpx.Headers) -> LLMResponse:
            return check_reply(self._parse_reply(data, self._request_id(headers)))

        response = await self._http.post_json(self.endpoint_path, body, deadline, parse)
        if response.usage.calls == 0:
            response = await self._with_estimate(request, response)
        return response

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Run the request streaming (SSE); the last event is a :class:`FinishEvent`, after a
        :class:`UsageEvent` when the server reported usage (else usage is counted locally).

        A server that answers with the whole JSON reply instead (it ignored ``"stream": true``)
        is read as that reply: its text and tool calls come as one delta each (its reasoning
        only in the final reply). An empty reply (no text, no tool calls, no reasoning) is
        retried like a 5xx, as nothing has reached the caller.

        Raises:
            ProviderTimeoutError: When the call's deadline passes, streaming included.
            StreamError: When the stream breaks (retryable), carries an error event, a
                malformed event, or ends before the reply is complete.
            EmptyReplyError: When the replies stay empty, or the finish reason says why.
            ProviderError: (a subclass) when the call fails; never retried after the response
                headers arrived, but for an empty reply.
        """
        deadline = self._http.deadline(request.timeout)
        attempt = 0
        while True:
            body, opened, yielded = self._wire_body(request, True), False, False
            opener = self._http.open(self.endpoint_path, body, deadline, attempt)
            try:
                async with opener:
                    response, opened = opener.response, True
                    request_id = self._request_id(response.headers)
                    if is_json(response):
                        data = await self._http.read_json(response, deadline, opener.attempt)
                        final = check_reply(self._parse_reply(data, request_id))
                        for event in reply_events(final):
                            yield event
                    else:
                        parser = self._stream_parser(request_id)
                        chunks, limit = body_chunks(response), read_timeout(response)
                        target = self._http.target
                        try:
                            while events := await next_events(
                                chunks, parser, deadline, limit, target
                            ):
                                yielded = True
                                for event in events:
                                    yield event
                        finally:
                            await chunks.aclose()
                        final = check_reply(parser.response())
                break
            except EmptyReplyError as error:
                if yielded:
                    raise
                attempt = error.attempts = opener.attempt
                await self._http.wait_to_retry(error, attempt, deadline)
            except ProviderError as error:
                if opened or not self._retry_refused(error, body):
                    raise
        # The connection and the key are back in their pools before the last events.
        if final.usage.calls == 0:
            final = await self._with_estimate(request, final)
        else:
            yield UsageEvent(final.usage)
        yield FinishEvent(final)

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

    def __repr__(self) -> str:
        pool = self._http.keys
        keys = ",".join(fingerprint(k) for k in pool.keys) if pool else "-"
        return (
            f"{type(self).__name__}(model={self.model_name!r}, base_url={self.base_url!r}, "
            f"keys=[{keys}])"
        )

    @classmethod
    def load_from_json_file(cls, path: str | Path) -> dict[str, dict[str, Self]]:
        """Load interfaces from a SimpleLLMFunc ``provider.json``.

        The file maps provider names to lists of ``{"model_name", "api_keys", "base_url", ...}``
        entries (extra keys become constructor arguments); the result maps provider → model
        name → interface.

        Raises:
            ConfigError: For a missing, unreadable or malformed file, naming what is wrong.
        """
        from ._config import load_provider_json

        return load_provider_json(cls, path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Build the interface from ``<PREFIX>_API_KEY`` (comma-separated for several keys),
        ``<PREFIX>_MODEL`` and ``<PREFIX>_BASE_URL`` (``OPENAI_*``; ``ANTHROPIC_*`` for
        Anthropic). Values come from ``environ`` (default: the process environment over
        ``./.env``).

        Raises:
            ConfigError: If no model or key is configured.
        """
        from ._config import interface_from_env

        return interface_from_env(cls, environ, cls.env_prefix, cls.default_base_url)


def _settings(
    http: HTTPSettings | None,
    timeout: float | None,
    connect_timeout: float | None,
    read_timeout: float | None,
    max_connections: int | None,
) -> HTTPSettings:
    """The connection settings: the ``http=`` value, or the flat keywords over the defaults.

    Raises:
        UserError: For ``http=`` together with a flat keyword.
    """
    given = [
        name
        for name, value in (
            ("timeout", timeout),
            ("connect_timeout", connect_timeout),
            ("read_timeout", read_timeout),
            ("max_connections", max_connections),
        )
        if value is not None
    ]
    if http is None:
        default = HTTPSettings()
        return HTTPSettings(
            default.timeout if timeout is None else timeout,
            default.connect_timeout if connect_timeout is None else connect_timeout,
            default.read_timeout if read_timeout is None else read_timeout,
            default.max_connections if max_connections is None else max_connections,
        )
    if given:
        raise UserError(f"give http=HTTPSettings(...) or {', '.join(given)}, not both")
    return http
