"""OpenAIResponsesCompatible: any ``/responses`` server (the OpenAI Responses API), on httpx."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import replace
from pathlib import Path
from typing import Any, Final, cast

import anyio
import httpx

from .._usage import Usage
from ..exceptions import ProviderError, ProviderTimeoutError, StreamError
from ._base import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from ._http import HTTPSettings, HTTPTransport
from ._keys import APIKeyPool
from ._openai import _drain, _pool, _stream_error
from ._ratelimit import TokenBucket
from ._redact import fingerprint
from ._responses_wire import build_responses_body, failure_message, parse_response
from ._retry import RetryPolicy
from ._sse import SSEDecoder
from ._tokens import count_message_tokens, count_text_tokens

__all__ = ["OpenAIResponsesCompatible"]

_PATH: Final = "/responses"


class OpenAIResponsesCompatible(LLMInterface):
    """A model behind an OpenAI Responses API (``POST /responses``) endpoint.

    The transcript is sent whole on every call (no ``previous_response_id``): the framework owns
    the history. Reasoning items the model returns are kept in
    ``AssistantMessage.reasoning_details`` and sent back on the next call; with ``store=False``
    pass ``include=["reasoning.encrypted_content"]`` so that they carry their content.

    Args:
        api_key_pool: An :class:`APIKeyPool`, one key or a list of keys (``None``: no auth).
        model_name: The model to request.
        base_url: The API root, e.g. ``https://api.openai.com/v1``.
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
        capabilities: What the server supports (defaults: everything).
        context_window: The model's context size in tokens, if known.
        headers: Extra HTTP headers.
        provider_name: Label used in events and errors.
        http_client: An ``httpx.AsyncClient`` to use (not closed by :meth:`aclose`).
        **default_params: Body parameters sent with every call (``temperature``, ``reasoning``,
            ``store``, ``include`` ...); ``max_tokens`` is sent as ``max_output_tokens``.

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
        return build_responses_body(
            request,
            model=self.model_name,
            caps=self.capabilities,
            stream=stream,
            defaults=self.default_params,
        )

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Run the request without streaming.

        Raises:
            StreamError: When a 200 response reports a failed response.
            ProviderError: (a subclass) when the call fails after retries.
        """
        deadline = self._http.deadline(request.timeout)
        data, headers = await self._http.post_json(_PATH, self._body(request, False), deadline)
        request_id = headers.get("x-request-id")
        failure = failure_message(data)
        if failure is not None:
            message = f"response failed: {failure[:300]}"
            raise _stream_error(self.provider_name, message, request_id)
        if not isinstance(data.get("output"), list):
            raise ProviderError(
                f"{self.provider_name}: response has no output",
                status=200,
                request_id=request_id,
                body_excerpt=json.dumps(data)[:300],
                provider=self.provider_name,
            )
        response = parse_response(data, self.provider_name, request_id)
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
            StreamError: For an ``error`` or ``response.failed`` event, a malformed event, or a
                stream that ends without ``response.completed``.
            ProviderError: (a subclass) when the call fails; never retried after the first event.
        """
        deadline = self._http.deadline(request.timeout)
        async with self._http.open(_PATH, self._body(request, True), deadline) as response:
            state = _StreamState(self, request, response.headers.get("x-request-id"))
            async with aclosing(state.events(response, deadline)) as events:
                async for event in events:
                    yield event

    def __repr__(self) -> str:
        pool = self._http.keys
        keys = ",".join(fingerprint(k) for k in pool.keys) if pool else "-"
        return (
            f"OpenAIResponsesCompatible(model={self.model_name!r}, base_url={self.base_url!r}, "
            f"keys=[{keys}])"
        )

    @classmethod
    def load_from_json_file(
        cls, path: str | Path
    ) -> dict[str, dict[str, OpenAIResponsesCompatible]]:
        """Load interfaces from a SimpleLLMFunc ``provider.json`` (the same file format as
        :meth:`OpenAICompatible.load_from_json_file`).

        Raises:
            ConfigError: For a missing, unreadable or malformed file, naming what is wrong.
        """
        from ._config import load_provider_json

        return load_provider_json(cls, path)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OpenAIResponsesCompatible:
        """Build the interface from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` / ``OPENAI_MODEL``.

        Raises:
            ConfigError: If no model or key is configured.
        """
        from ._config import openai_from_env

        return openai_from_env(cls, environ)


Handler = Callable[["_StreamState", dict[str, Any]], Sequence[StreamEvent]]


class _StreamState:
    """Turns Responses stream events into stream events and assembles the final response.

    The final response is the one ``response.completed`` carries; the items seen in the stream
    stand in for its ``output`` when a server leaves that out.
    """

    def __init__(
        self, llm: OpenAIResponsesCompatible, request: LLMRequest, request_id: str | None
    ) -> None:
        self.llm = llm
        self.request = request
        self.request_id = request_id
        self.items: dict[int, dict[str, Any]] = {}  # output_index -> latest item
        self.by_id: dict[str, int] = {}  # item id -> output_index
        self.texts: dict[int, list[str]] = {}
        self.arguments: dict[int, list[str]] = {}
        self.calls: dict[int, tuple[int, str | None]] = {}  # output_index -> position, call_id
        self.final: dict[str, Any] | None = None

    async def events(
        self, response: httpx.Response, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        decoder = SSEDecoder()
        provider = self.llm.provider_name
        async with aclosing(_read_chunks(provider, response, deadline)) as chunks:
            async for chunk in chunks:
                for sse in decoder.feed(chunk):
                    for event in self._handle(sse.event, sse.data):
                        yield event
                    if self.final is not None:
                        break
                if self.final is not None:
                    await _drain(chunks, deadline)
                    break
        if self.final is None:
            message = "stream ended before response.completed"
            raise _stream_error(provider, message, self.request_id)
        final = await self._response(self.final)
        if final.usage.calls and not final.usage.estimated:
            yield UsageEvent(final.usage)
        yield FinishEvent(final)

    def _handle(self, name: str, data: str) -> Sequence[StreamEvent]:
        try:
            payload = json.loads(data)
        except ValueError:
            raise self._error(f"malformed stream event: {data[:120]!r}") from None
        if not isinstance(payload, dict):
            raise self._error(f"stream event is not an object: {data[:120]!r}")
        kind = payload.get("type")
        if not isinstance(kind, str):
            kind = "error" if "error" in payload else name
        handler = _HANDLERS.get(kind)
        return handler(self, payload) if handler is not None else ()

    def _error(self, message: str) -> StreamError:
        return _stream_error(self.llm.provider_name, message, self.request_id)

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("output_index")
        if isinstance(index, int):
            return index
        known = self.by_id.get(str(payload.get("item_id")))
        return known if known is not None else -1

    def text(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        delta = payload.get("delta")
        if not isinstance(delta, str) or not delta:
            return ()
        self.texts.setdefault(self._index(payload), []).append(delta)
        return (TextDelta(delta),)

    def reasoning(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        delta = payload.get("delta")
        return (ReasoningDelta(delta),) if isinstance(delta, str) and delta else ()

    def item(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise self._error(f"{payload.get('type')} without an item")
        index = self._index(payload)
        if index < 0:
            index = len(self.items)
        self.items[index] = item
        if isinstance(item.get("id"), str):
            self.by_id[item["id"]] = index
        if item.get("type") != "function_call" or index in self.calls:
            return ()
        call_id = _string(item.get("call_id"))
        self.calls[index] = (len(self.calls), call_id)
        arguments = _string(item.get("arguments")) or ""
        return (ToolCallDelta(self.calls[index][0], call_id, _string(item.get("name")), arguments),)

    def arguments_delta(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        delta = payload.get("delta")
        if not isinstance(delta, str) or not delta:
            return ()
        index = self._index(payload)
        self.arguments.setdefault(index, []).append(delta)
        position, call_id = self.calls.setdefault(index, (len(self.calls), None))
        return (ToolCallDelta(position, call_id, None, delta),)

    def finished(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        response = payload.get("response")
        if not isinstance(response, dict):
            raise self._error(f"{payload.get('type')} without a response object")
        self.final = response
        return ()

    def failed(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        response = payload.get("response")
        failure = failure_message(response) if isinstance(response, dict) else None
        raise self._error(f"response failed: {(failure or 'no details')[:300]}")

    def error(self, payload: dict[str, Any]) -> Sequence[StreamEvent]:
        error = payload.get("error")
        details = error if isinstance(error, dict) else payload
        message, code = details.get("message"), details.get("code")
        text = str(message or error or "no details")[:300]
        raise self._error(f"error event in stream: {text}" + (f" ({code})" if code else ""))

    def _output(self, final: dict[str, Any]) -> list[Any]:
        output = final.get("output")
        if isinstance(output, list) and output:
            return output
        rebuilt = []
        for index in sorted(self.items.keys() | self.texts.keys() | self.arguments.keys()):
            item = dict(self.items.get(index) or {})
            if index in self.texts and not item.get("content"):
                item.setdefault("type", "message")
                item["content"] = [{"type": "output_text", "text": "".join(self.texts[index])}]
            if index in self.arguments and not item.get("arguments"):
                item.setdefault("type", "function_call")
                item["arguments"] = "".join(self.arguments[index])
            rebuilt.append(item)
        return rebuilt

    async def _response(self, final: dict[str, Any]) -> LLMResponse:
        data = {**final, "output": self._output(final)}
        failure = failure_message(data)
        if failure is not None:
            raise self._error(f"response failed: {failure[:300]}")
        response = parse_response(data, self.llm.provider_name, self.request_id)
        if any(not call.name for call in response.message.tool_calls):
            raise self._error("streamed tool call has no function name")
        response = replace(response, raw=None)
        if response.usage.calls == 0:
            response = await self.llm._with_estimate(self.request, response)
        return response


_TEXT: Final = ("response.output_text.delta", "response.refusal.delta")
_REASONING: Final = ("response.reasoning_summary_text.delta", "response.reasoning_text.delta")
_HANDLERS: Final[dict[str, Handler]] = {
    **dict.fromkeys(_TEXT, _StreamState.text),
    **dict.fromkeys(_REASONING, _StreamState.reasoning),
    "response.output_item.added": _StreamState.item,
    "response.output_item.done": _StreamState.item,
    "response.function_call_arguments.delta": _StreamState.arguments_delta,
    "response.completed": _StreamState.finished,
    "response.incomplete": _StreamState.finished,
    "response.failed": _StreamState.failed,
    "error": _StreamState.error,
}


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


async def _read_chunks(
    provider: str, response: httpx.Response, deadline: float
) -> AsyncGenerator[bytes, None]:
    """Decoded body chunks, each read under the call's deadline.

    As the chat-completions adapter reads them, but with a bare ``CancelScope`` per chunk instead
    of ``fail_after`` (half the cost, and a stream event is often a chunk of its own).
    ``aiter_bytes`` undoes a ``Content-Encoding`` some proxies apply even to event streams.
    """
    body = cast("AsyncGenerator[bytes, None]", response.aiter_bytes())
    request_id = response.headers.get("x-request-id")
    async with aclosing(body) as iterator:
        while True:
            try:
                with anyio.CancelScope(deadline=deadline) as scope:
                    chunk = await anext(iterator)
            except StopAsyncIteration:
                return
            except httpx.HTTPError as exc:
                # The response had arrived: a broken stream, which a new call may not hit.
                message = f"stream broken: {type(exc).__name__}"
                raise _stream_error(provider, message, request_id, retryable=True) from exc
            if scope.cancelled_caught:
                raise ProviderTimeoutError(
                    f"{provider}: call deadline passed while streaming",
                    status=200,
                    request_id=request_id,
                    provider=provider,
                )
            yield chunk
