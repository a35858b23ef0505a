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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._messages import AssistantMessage, ToolCall
from ..._unicode import loads_reply
from ..._usage import Usage
from .._base import LLMResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from .._sse import SSEDecoder
from .._stream import stream_error
from ._wire import (
    error_event,
    finish_reason,
    mark_truncated,
    reasoning_detail,
    usage_from_anthropic,
)

__all__ = ["MessagesStreamParser"]


@dataclass(slots=True)
class _Block:
    """A content block being streamed (mutable, private to the stream state)."""

    kind: str
    start: dict[str, Any]
    parts: list[str] = field(default_factory=list)
    position: int = -1  # the tool call's position among the reply's calls
    signature: str = ""


class MessagesStreamParser:
    """Turns the Messages SSE stream of one response into stream events, then the reply.

    Args:
        provider: Label for errors.
        request_id: The provider's request id, for errors.
    """

    def __init__(self, provider: str, request_id: str | None) -> None:
        self.provider = provider
        self.request_id = request_id
        self.blocks: dict[int, _Block] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.model = ""
        self.done = False  # message_stop arrived: anything after it is ignored
        self.calls = 0
        self.decoder = SSEDecoder()

    def feed_bytes(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events completed by a chunk of the response body (any split).

        Raises:
            StreamError: As :meth:`feed`.
        """
        out: list[StreamEvent] = []
        for sse in self.decoder.feed(chunk):
            if self.done:
                break
            out += self.feed(sse.event, sse.data)
        return out

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """Handle one SSE event. ``content_block_stop`` needs nothing (a block is whole when the
        message ends); ``ping``, unknown event types and events with empty data (a bare
        ``data:`` line) are ignored.

        Raises:
            StreamError: For an ``error`` event (with data or without) or a malformed one.
        """
        if not data or data.isspace():
            if event != "error":
                return []
            data = "{}"
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
            self.done = True
        elif kind == "error":
            raise error_event(self.provider, payload, self.request_id)
        return []

    def _decode(self, event: str, data: str) -> dict[str, Any]:
        try:
            payload = loads_reply(data)
        except ValueError:
            message = f"malformed stream event: {data[:120]!r}"
            raise stream_error(self.provider, message, self.request_id) from None
        if not isinstance(payload, dict):
            message = f"stream event is not an object: {data[:120]!r}"
            raise stream_error(self.provider, message, self.request_id)
        if event == "error":
            raise error_event(self.provider, payload, self.request_id)
        return payload

    def _start(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        start = payload.get("content_block")
        if not isinstance(start, dict):
            raise stream_error(
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
                raise stream_error(
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
        if not self.done and self.stop_reason is None:
            message = "stream ended before the reply was complete"
            raise stream_error(self.provider, message, self.request_id, retryable=True)
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
            raise stream_error(self.provider, "tool_use block has no name", self.request_id)
        arguments = "".join(block.parts)
        if not arguments and block.start.get("input"):  # some proxies send the input whole
            arguments = json.dumps(block.start["input"], ensure_ascii=False)
        call = ToolCall(str(block.start["id"]), name, arguments or "{}")
        return mark_truncated(call) if cut else call
