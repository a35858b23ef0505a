"""OpenAI Chat Completions wire format: request bodies, responses and stream chunks."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from ..._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from ..._usage import Usage
from ...exceptions import StreamError
from .._assembly import ToolCallAssembler
from .._base import (
    Capabilities,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
)
from .._sse import ServerSentEvent, SSEDecoder

__all__ = [
    "ChatStreamParser",
    "build_chat_body",
    "parse_chat_response",
    "stream_error",
    "wire_message",
]

_PASSTHROUGH = ("name",)


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [p.to_part() for p in content]


def wire_message(message: Message, caps: Capabilities) -> dict[str, Any]:
    """One message as chat completions accepts it (framework metadata left out)."""
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message, AssistantMessage):
        content = message.content
        out["content"] = content if content is not None or caps.null_assistant_content else ""
        if message.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in message.tool_calls]
    elif isinstance(message, ToolMessage):
        out["tool_call_id"] = message.tool_call_id
        out["content"] = _content(message.content)
    elif isinstance(message, UserMessage):
        out["content"] = _content(message.content)
    else:
        out["content"] = message.content
    for key in _PASSTHROUGH:
        if key in message.extra:
            out[key] = message.extra[key]
    return out


def build_chat_body(
    request: LLMRequest,
    *,
    model: str,
    caps: Capabilities,
    stream: bool,
    include_usage: bool,
    defaults: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON body of a ``/chat/completions`` call."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [wire_message(m, caps) for m in request.messages],
    }
    if request.tools and caps.native_tools:
        body["tools"] = [t.to_openai() for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if request.response_format is not None and caps.json_schema:
        fmt = request.response_format
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.name, "schema": dict(fmt.schema), "strict": fmt.strict},
        }
    if stream:
        body["stream"] = True
        if include_usage:
            body["stream_options"] = {"include_usage": True}
    body.update(defaults)
    body.update(request.params)
    return body


def _tool_calls(raw: Any) -> tuple[ToolCall, ...]:
    calls = []
    prefix = ""
    for n, item in enumerate(raw or ()):
        if not isinstance(item, dict):
            continue
        fn = item.get("function")
        fn = fn if isinstance(fn, dict) else {}
        arguments = fn.get("arguments", "")
        if not isinstance(arguments, str):  # some servers send an object
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = item.get("id")
        if not call_id or not isinstance(call_id, str):
            # Made-up ids must not repeat across the turns of a conversation (a history may not
            # reuse a tool-call id): the same scheme as the stream assembler's.
            prefix = prefix or f"call_{uuid.uuid4().hex[:12]}_"
            call_id = f"{prefix}{n}"
        calls.append(ToolCall(call_id, str(fn.get("name") or ""), arguments))
    return tuple(calls)


def reasoning_details(text: str) -> tuple[Mapping[str, Any], ...]:
    """Wrap separately reported reasoning text in the ``reasoning_details`` shape."""
    return ({"type": "reasoning.text", "text": text},) if text else ()


def parse_chat_response(
    data: Mapping[str, Any], provider: str, request_id: str | None
) -> LLMResponse | None:
    """Parse a non-streamed completion; ``None`` if it has no choices."""
    choices = data.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return None
    raw_message = choices[0].get("message") or {}
    reasoning = tuple(raw_message.get("reasoning_details") or ()) or reasoning_details(
        raw_message.get("reasoning_content") or ""
    )
    content = raw_message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    message = AssistantMessage(content, _tool_calls(raw_message.get("tool_calls")), reasoning)
    usage = data.get("usage")
    return LLMResponse(
        message=message,
        finish_reason=choices[0].get("finish_reason"),
        usage=Usage.from_openai(usage) if isinstance(usage, dict) else Usage(),
        model=str(data.get("model") or ""),
        request_id=request_id or data.get("id"),
        provider=provider,
        raw=data,
    )


_RAW_DECODE = json.JSONDecoder().raw_decode


def _loads(data: str) -> Any:
    """``json.loads`` for stream chunks, without its two regex passes in the common case.

    Raises:
        ValueError: For invalid JSON or text after the value.
    """
    try:
        value, end = _RAW_DECODE(data)
    except ValueError:
        return json.loads(data)  # e.g. leading whitespace; raises for really invalid JSON
    if end != len(data) and not data[end:].isspace():
        raise ValueError(f"extra data after the JSON value at {end}")
    return value


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


class ChatStreamParser:
    """Turns the SSE events of a streamed completion into stream events and the final reply.

    Every chunk passes through here, so it does no more than it must: one ``json.loads`` per
    event, and a tool-call assembler only once a tool call shows up.

    Args:
        provider: Label for errors.
        request_id: The provider's request id, for errors.
    """

    __slots__ = (
        "decoder",
        "done",
        "finish_reason",
        "model",
        "provider",
        "reasoning",
        "request_id",
        "text",
        "tools",
        "usage",
    )

    def __init__(self, provider: str, request_id: str | None) -> None:
        self.provider = provider
        self.request_id = request_id
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.tools: ToolCallAssembler | None = None
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.model = ""
        self.done = False  # [DONE] arrived: anything after it is ignored
        self.decoder = SSEDecoder()

    def feed_bytes(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events completed by a chunk of the response body (any split).

        Raises:
            StreamError: As :meth:`feed`.
        """
        return self.feed(self.decoder.feed(chunk))

    def feed(self, events: list[ServerSentEvent]) -> list[StreamEvent]:
        """The stream events carried by ``events`` (SSE events of one network chunk).

        Raises:
            StreamError: For an ``error`` event, an ``{"error": ...}`` chunk or a malformed one.
        """
        out: list[StreamEvent] = []
        for sse in events:
            if self.done:
                break
            if sse.data == "[DONE]":
                self.done = True
            else:
                self._handle(sse.event, sse.data, out)
        return out

    def _fail(self, message: str) -> StreamError:
        return stream_error(self.provider, message, self.request_id)

    def _decode(self, event: str, data: str) -> dict[str, Any]:
        if event == "error":
            raise self._fail(f"error event in stream: {data[:300]}")
        try:
            chunk = _loads(data)
        except ValueError:
            raise self._fail(f"malformed stream chunk: {data[:120]!r}") from None
        if not isinstance(chunk, dict):
            raise self._fail(f"stream chunk is not an object: {data[:120]!r}")
        if chunk.get("error"):
            raise self._fail(f"error in stream: {str(chunk['error'])[:300]}")
        return chunk

    def _handle(self, event: str, data: str, out: list[StreamEvent]) -> None:
        chunk = self._decode(event, data)
        if (usage := chunk.get("usage")) and isinstance(usage, dict):
            self.usage = Usage.from_openai(usage)
        if not self.model:
            self.model = str(chunk.get("model") or "")
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            if not (isinstance(choice, dict) and choice.get("finish_reason")):
                raise self._fail("chunk without a delta")
            delta = {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning and isinstance(reasoning, str):
            self.reasoning.append(reasoning)
            out.append(ReasoningDelta(reasoning))
        text = delta.get("content")
        if text and isinstance(text, str):
            self.text.append(text)
            out.append(TextDelta(text))
        if raw_calls := delta.get("tool_calls"):
            tools = self.tools = self.tools or ToolCallAssembler()
            for raw_call in raw_calls:
                if (normalized := tools.add(raw_call)) is not None:
                    out.append(normalized)
        if finish := choice.get("finish_reason"):
            self.finish_reason = finish

    def response(self) -> LLMResponse:
        """The assembled reply (``usage`` empty when the server sent none).

        Raises:
            StreamError: When the stream ended before ``[DONE]`` and without a finish reason,
                or a tool call never got a name.
        """
        if not self.done and self.finish_reason is None:
            raise self._fail("stream ended before the reply was complete")
        message = AssistantMessage(
            "".join(self.text) or None,
            self.tools.finish() if self.tools is not None else (),
            reasoning_details("".join(self.reasoning)),
        )
        return LLMResponse(
            message=message,
            finish_reason=self.finish_reason,
            usage=self.usage or Usage(),
            model=self.model,
            request_id=self.request_id,
            provider=self.provider,
        )
