"""The Messages API event stream: SSE events in, stream events and the assembled reply out.

Anthropic streams ``message_start`` (model, input usage), then per content block
``content_block_start`` / ``content_block_delta`` (``text_delta``, ``input_json_delta``,
``thinking_delta``, ``signature_delta``) / ``content_block_stop``, then ``message_delta``
(``stop_reason``, output usage) and ``message_stop``; ``ping`` may come anywhere and an ``error``
event may replace the rest of the stream after the 200.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, cast

import anyio
import httpx

from ..._messages import AssistantMessage, ToolCall
from ..._usage import Usage
from ...exceptions import ProviderTimeoutError, StreamError
from .._base import LLMResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from .._sse import SSEDecoder
from ._wire import finish_reason, mark_truncated, reasoning_detail, usage_from_anthropic

__all__ = ["MessagesStream", "error_event", "request_id"]

_DRAIN_SECONDS: Final = 1.0
_RETRYABLE_ERRORS: Final = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


def request_id(headers: httpx.Headers) -> str | None:
    """The request id of a response (Anthropic sends ``request-id``)."""
    value: str | None = headers.get("request-id") or headers.get("x-request-id")
    return value


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


def error_event(provider: str, payload: Mapping[str, Any], request_id: str | None) -> StreamError:
    """The error for a ``{"type": "error", "error": {...}}`` object sent after a 200.

    ``overloaded_error``, ``api_error`` and ``rate_limit_error`` are marked retryable: the same
    request may succeed later (the stream itself is never retried).
    """
    error = payload.get("error")
    error = error if isinstance(error, dict) else {}
    kind = str(error.get("type") or "error")
    message = f"error after 200: {kind}: {str(error.get('message') or '')[:300]}"
    return _stream_error(provider, message, request_id, retryable=kind in _RETRYABLE_ERRORS)


async def _read_chunks(
    provider: str, response: httpx.Response, deadline: float
) -> AsyncGenerator[bytes, None]:
    """Decoded body chunks, each read under what is left of the call's deadline."""
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
                    f"{provider}: call deadline passed while streaming",
                    status=200,
                    request_id=request_id(response.headers),
                    provider=provider,
                ) from None
            except httpx.HTTPError as exc:
                # The response had arrived: a broken stream, which a new call may not hit.
                message = f"stream broken: {type(exc).__name__}"
                raise _stream_error(
                    provider, message, request_id(response.headers), retryable=True
                ) from exc
            yield chunk


async def _drain(chunks: AsyncIterator[bytes], deadline: float) -> None:
    """Read what follows ``message_stop`` (the end of the chunked body), so the connection goes
    back to the pool; a server that keeps talking gets a short grace period."""
    with anyio.move_on_after(min(_DRAIN_SECONDS, max(deadline - anyio.current_time(), 0))):
        async for _ in chunks:
            pass


@dataclass(slots=True)
class _Block:
    """A content block being streamed (mutable, private to the stream state)."""

    kind: str
    start: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    position: int = -1  # the tool call's position among the reply's calls
    signature: str = ""


class MessagesStream:
    """Turns the Messages SSE stream of one response into stream events, then the reply.

    Iterate :meth:`events` over the open response, then call :meth:`response`.
    """

    def __init__(self, provider: str, request_id: str | None) -> None:
        self.provider = provider
        self.request_id = request_id
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.model = ""
        self.stopped = False
        self.calls = 0

    async def events(
        self, response: httpx.Response, deadline: float
    ) -> AsyncGenerator[StreamEvent, None]:
        """The stream events of ``response``, until ``message_stop`` or the end of the body.

        Raises:
            StreamError: For an error event, a malformed event or a broken connection.
            ProviderTimeoutError: When the deadline passes while streaming.
        """
        decoder = SSEDecoder()
        async with aclosing(_read_chunks(self.provider, response, deadline)) as chunks:
            async for chunk in chunks:
                for sse in decoder.feed(chunk):
                    for event in self.feed(sse.event, sse.data):
                        yield event
                if self.stopped:
                    break
            if self.stopped:
                await _drain(chunks, deadline)

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """Handle one SSE event. ``content_block_stop`` needs nothing (a block is whole when the
        message ends); ``ping`` and unknown event types are ignored.

        Raises:
            StreamError: For an ``error`` event or a malformed one.
        """
        payload = self._decode(event, data)
        kind = payload.get("type") or event
        if kind == "content_block_delta":
            return self._delta(payload)
        if kind == "content_block_start":
            return self._start(payload)
        if kind == "message_start":
            message = payload.get("message") or {}
            self.model = str(message.get("model") or "")
            self.usage.update(message.get("usage") or {})
        elif kind == "message_delta":
            self.stop_reason = (payload.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update(payload.get("usage") or {})
        elif kind == "message_stop":
            self.stopped = True
        elif kind == "error":
            raise error_event(self.provider, payload, self.request_id)
        return []

    def _decode(self, event: str, data: str) -> dict[str, Any]:
        try:
            payload = json.loads(data)
        except ValueError:
            message = f"malformed stream event: {data[:120]!r}"
            raise _stream_error(self.provider, message, self.request_id) from None
        if not isinstance(payload, dict):
            message = f"stream event is not an object: {data[:120]!r}"
            raise _stream_error(self.provider, message, self.request_id)
        if event == "error":
            raise error_event(self.provider, payload, self.request_id)
        return payload

    def _start(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        start = payload.get("content_block")
        if not isinstance(start, dict):
            raise _stream_error(
                self.provider, "content_block_start without a block", self.request_id
            )
        block = _Block(str(start.get("type")), start)
        self.blocks[payload.get("index", len(self.blocks))] = block
        if block.kind == "text" and start.get("text"):
            return self._add(block, str(start["text"]))
        if block.kind == "thinking":
            block.signature = str(start.get("signature") or "")
            if start.get("thinking"):
                return self._add(block, str(start["thinking"]))
        if block.kind == "tool_use":
            block.position, self.calls = self.calls, self.calls + 1
            if not start.get("id"):
                start["id"] = f"toolu_{uuid.uuid4().hex[:24]}"
            return [ToolCallDelta(block.position, start["id"], str(start.get("name") or ""), "")]
        return []

    def _delta(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        delta = payload.get("delta") or {}
        index = payload.get("index", -1)
        block = self.blocks.get(index)
        kind = delta.get("type")
        if block is None:
            if kind != "text_delta":
                raise _stream_error(
                    self.provider, f"delta for unknown block {index}", self.request_id
                )
            block = self.blocks[index] = _Block("text", {"type": "text"})  # lenient: no start
        if kind == "text_delta":
            return self._add(block, delta.get("text"))
        if kind == "input_json_delta":
            return self._add(block, delta.get("partial_json"))
        if kind == "thinking_delta":
            return self._add(block, delta.get("thinking"))
        if kind == "signature_delta":
            block.signature += str(delta.get("signature") or "")
        return []  # citations and future delta types carry nothing the engine uses

    def _add(self, block: _Block, text: Any) -> list[StreamEvent]:
        if not text or not isinstance(text, str):
            return []
        block.parts.append(text)
        if block.kind == "text":
            return [TextDelta(text)]
        if block.kind == "thinking":
            return [ReasoningDelta(text)]
        if block.kind == "tool_use":
            return [ToolCallDelta(block.position, block.start["id"], None, text)]
        return []

    def response(self) -> LLMResponse:
        """The assembled reply.

        Raises:
            StreamError: When the stream ended before the reply was complete.
        """
        if not self.stopped and self.stop_reason is None:
            message = "stream ended before the reply was complete"
            raise _stream_error(self.provider, message, self.request_id, retryable=True)
        finish = finish_reason(self.stop_reason)
        texts: list[str] = []
        calls: list[ToolCall] = []
        reasoning: list[Mapping[str, Any]] = []
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        for n, block in enumerate(ordered):
            if block.kind == "text":
                texts.extend(block.parts)
            elif block.kind == "tool_use":
                calls.append(self._call(block, finish == "length" and n == len(ordered) - 1))
            elif block.kind == "thinking":
                detail = {"type": "thinking", "thinking": "".join(block.parts)}
                reasoning.append(reasoning_detail({**detail, "signature": block.signature}))
            elif block.kind == "redacted_thinking":
                reasoning.append(reasoning_detail(block.start))
        return LLMResponse(
            message=AssistantMessage("".join(texts) or None, tuple(calls), tuple(reasoning)),
            finish_reason=finish,
            usage=usage_from_anthropic(self.usage) if self.usage else Usage(),
            model=self.model,
            request_id=self.request_id,
            provider=self.provider,
        )

    def _call(self, block: _Block, cut: bool) -> ToolCall:
        name = block.start.get("name")
        if not name or not isinstance(name, str):
            raise _stream_error(self.provider, "tool_use block has no name", self.request_id)
        arguments = "".join(block.parts)
        if not arguments and block.start.get("input"):  # some proxies send the input whole
            arguments = json.dumps(block.start["input"], ensure_ascii=False)
        call = ToolCall(str(block.start["id"]), name, arguments or "{}")
        return mark_truncated(call) if cut else call
