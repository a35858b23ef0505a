"""OpenAI Responses API wire format: request bodies (input items) and response parsing.

Transcript → request: the first system message becomes ``instructions``; user and assistant turns
become ``message`` items (``input_text`` / ``input_image`` / ``output_text`` parts, images kept as
images); assistant tool calls become ``function_call`` items and tool results
``function_call_output`` items.

Reasoning items come back verbatim: every ``reasoning`` output item is kept, as the raw dict, in
``AssistantMessage.reasoning_details`` and sent again as an input item. The API links a reasoning
item to the item that followed it (by item id, in order), so when a reply has reasoning items the
order and ids of its output items are kept too, in one more ``reasoning_details`` entry of type
:data:`ITEM_ORDER` (other providers skip entries whose type they do not know).

Streams: :class:`ResponsesStreamParser` turns the SSE events into stream events and takes the
final reply from the terminal ``response.completed`` / ``response.incomplete`` event.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from ..._content import ContentPart, ImgPath, Text
from ..._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ..._usage import Usage
from ...exceptions import StreamError
from .._base import (
    Capabilities,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
)
from .._openai._wire import stream_error
from .._sse import SSEDecoder

__all__ = [
    "ITEM_ORDER",
    "ResponsesStreamParser",
    "build_responses_body",
    "failure_message",
    "input_items",
    "parse_response",
]

ITEM_ORDER: Final = "responses.item_order"
"""Type of the ``reasoning_details`` entry that records the order and ids of output items."""

# Chat-completions names of the reply budget, accepted for portability across providers.
_MAX_TOKEN_ALIASES: Final = ("max_tokens", "max_completion_tokens")
_INCOMPLETE_REASONS: Final = {"max_output_tokens": "length", "content_filter": "content_filter"}


# -- request ---------------------------------------------------------------------------------------


def _part(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "input_text", "text": part.text}
    image = part.to_img_url() if isinstance(part, ImgPath) else part
    return {"type": "input_image", "image_url": image.url, "detail": image.detail}


def _input_content(content: str | tuple[ContentPart, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [_part(p) for p in content]


def _tool_output(message: ToolMessage) -> str | list[dict[str, Any]]:
    content = message.content
    if isinstance(content, str) or all(isinstance(p, Text) for p in content):
        return message.text  # the common case: plain text, as every server accepts it
    return [_part(p) for p in content]


def _assistant_text(text: str, item_id: str | None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    if item_id is not None:  # an output message as the API returned it: id and status go back
        item["id"] = item_id
        item["status"] = "completed"
    return item


def _function_call(call: ToolCall, item_id: str | None) -> dict[str, Any]:
    item = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }
    if item_id is not None:
        item["id"] = item_id
    return item


def _assistant_items(message: AssistantMessage) -> Iterator[dict[str, Any]]:
    """The items of one assistant turn, in the order the model produced them when known."""
    reasoning: dict[str, dict[str, Any]] = {}
    order: Sequence[Mapping[str, Any]] = ()
    loose: list[dict[str, Any]] = []
    for detail in message.reasoning_details:
        kind = detail.get("type")
        if kind == "reasoning":
            if isinstance(detail.get("id"), str):
                reasoning[detail["id"]] = dict(detail)
            else:
                loose.append(dict(detail))
        elif kind == ITEM_ORDER and isinstance(detail.get("items"), list | tuple):
            order = detail["items"]
    calls = list(message.tool_calls)
    text = message.content
    for entry in order:
        kind, item_id = entry.get("type"), entry.get("id")
        if kind == "reasoning" and item_id in reasoning:
            yield reasoning.pop(item_id)
        elif kind == "message" and text:
            yield _assistant_text(text, item_id if isinstance(item_id, str) else None)
            text = None
        elif kind == "function_call" and calls:
            yield _function_call(calls.pop(0), item_id if isinstance(item_id, str) else None)
    # Whatever the order did not place (no order recorded, or an edited turn) follows in the
    # usual order: reasoning, text, calls.
    yield from loose
    yield from reasoning.values()
    if text:
        yield _assistant_text(text, None)
    for call in calls:
        yield _function_call(call, None)


def input_items(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a transcript into ``instructions`` and the ``input`` items."""
    instructions: str | None = None
    items: list[dict[str, Any]] = []
    for n, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            if n == 0:
                instructions = message.content
            else:
                items.append({"type": "message", "role": "system", "content": message.content})
        elif isinstance(message, UserMessage):
            content = _input_content(message.content)
            items.append({"type": "message", "role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            items.extend(_assistant_items(message))
        else:
            output = _tool_output(message)
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}
            )
    return instructions, items


def _tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, Mapping):
        # The chat-completions shape {"type": "function", "function": {"name": ...}}.
        return {"type": "function", "name": function.get("name")}
    return dict(choice)


def build_responses_body(
    request: LLMRequest,
    *,
    model: str,
    caps: Capabilities,
    stream: bool,
    defaults: Mapping[str, Any],
) -> dict[str, Any]:
    """The JSON body of a ``/responses`` call."""
    instructions, items = input_items(request.messages)
    body: dict[str, Any] = {"model": model, "input": items}
    if instructions is not None:
        body["instructions"] = instructions
    if request.tools and caps.native_tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            }
            for t in request.tools
        ]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.response_format is not None and caps.json_schema:
        fmt = request.response_format
        body["text"] = {
            "format": {
                "type": "json_schema",
                "name": fmt.name,
                "schema": dict(fmt.schema),
                "strict": fmt.strict,
            }
        }
    if stream:
        body["stream"] = True
    for params in (defaults, request.params):
        _merge_params(body, params)
    return body


def _merge_params(body: dict[str, Any], params: Mapping[str, Any]) -> None:
    for key, value in params.items():
        if key in _MAX_TOKEN_ALIASES:
            body.setdefault("max_output_tokens", value)
        elif key == "text" and isinstance(value, Mapping) and isinstance(body.get("text"), dict):
            body["text"] = {**body["text"], **value}  # e.g. verbosity next to the schema format
        else:
            body[key] = value


# -- response --------------------------------------------------------------------------------------


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False)


def _message_text(item: Mapping[str, Any]) -> str:
    pieces = []
    for part in item.get("content") or ():
        if not isinstance(part, dict):
            continue
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            pieces.append(part["refusal"])
    return "".join(pieces)


def parse_output(output: Sequence[Any]) -> AssistantMessage:
    """The assistant message made of a response's ``output`` items.

    Items other than messages, function calls and reasoning (built-in tool calls) are skipped.
    """
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Mapping[str, Any]] = []
    order: list[dict[str, str]] = []
    prefix = ""
    for item in output:
        if not isinstance(item, dict):
            continue
        kind, item_id = item.get("type"), item.get("id")
        if kind == "message":
            texts.append(_message_text(item))
        elif kind == "function_call":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                # Unique across turns, like the chat-completions adapter's made-up ids.
                prefix = prefix or f"call_{uuid.uuid4().hex[:12]}_"
                call_id = f"{prefix}{len(calls)}"
            calls.append(
                ToolCall(call_id, str(item.get("name") or ""), _arguments(item.get("arguments")))
            )
        elif kind == "reasoning":
            reasoning.append(MappingProxyType(dict(item)))
        else:
            continue
        if isinstance(item_id, str):
            order.append({"type": str(kind), "id": item_id})
    if reasoning:
        reasoning.append(MappingProxyType({"type": ITEM_ORDER, "items": order}))
    text = "".join(texts)
    return AssistantMessage(text or None, tuple(calls), tuple(reasoning))


def failure_message(data: Mapping[str, Any]) -> str | None:
    """The error of a failed response object, or ``None`` when it did not fail."""
    error = data.get("error")
    if data.get("status") != "failed" and not error:
        return None
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        text = str(message) if message else "response failed"
        return f"{text} ({code})" if code else text
    return str(error) if error else "response failed"


def _finish_reason(data: Mapping[str, Any], has_calls: bool) -> str:
    if data.get("status") == "incomplete":
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        return _INCOMPLETE_REASONS.get(str(reason), str(reason or "length"))
    return "tool_calls" if has_calls else "stop"


def parse_response(data: Mapping[str, Any], provider: str, request_id: str | None) -> LLMResponse:
    """Parse a response object (the non-streamed body, or the one a stream ends with)."""
    output = data.get("output")
    message = parse_output(output if isinstance(output, list) else ())
    usage = data.get("usage")
    return LLMResponse(
        message=message,
        finish_reason=_finish_reason(data, bool(message.tool_calls)),
        usage=Usage.from_openai(usage) if isinstance(usage, dict) else Usage(),
        model=str(data.get("model") or ""),
        request_id=request_id or (data.get("id") if isinstance(data.get("id"), str) else None),
        provider=provider,
        raw=data,
    )


# -- stream ----------------------------------------------------------------------------------------


class ResponsesStreamParser:
    """Turns the SSE events of a streamed response into stream events and the final reply.

    The final reply is the response object that ``response.completed`` (or
    ``response.incomplete``) carries; the items seen in the stream stand in for its ``output``
    when a server leaves that out. Events are told apart by their JSON ``type`` (the SSE
    ``event:`` line only when there is none), so servers that send bare ``data:`` lines work too.

    Args:
        provider: Label for errors.
        request_id: The provider's request id, for errors.
    """

    __slots__ = (
        "arguments",
        "by_id",
        "calls",
        "decoder",
        "done",
        "final",
        "items",
        "provider",
        "request_id",
        "text_index",
        "texts",
    )

    def __init__(self, provider: str, request_id: str | None) -> None:
        self.provider = provider
        self.request_id = request_id
        self.items: dict[int, dict[str, Any]] = {}  # output_index -> latest item
        self.by_id: dict[str, int] = {}  # item id -> output_index
        self.texts: list[str] = []  # every text delta (one reply message)
        self.text_index: int | None = None  # the output_index of the first one
        self.arguments: dict[int, list[str]] = {}
        self.calls: dict[int, tuple[int, str | None]] = {}  # output_index -> position, call_id
        self.final: dict[str, Any] | None = None
        self.done = False  # the terminal event arrived: anything after it is ignored
        self.decoder = SSEDecoder()

    def feed_bytes(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events completed by a chunk of the response body (any split).

        Raises:
            StreamError: For an ``error`` or ``response.failed`` event, or a malformed one.
        """
        out: list[StreamEvent] = []
        for sse in self.decoder.feed(chunk):
            if self.done:
                break
            if sse.event not in _UNUSED:
                self._handle(sse.event, sse.data, out)
        return out

    def response(self) -> LLMResponse:
        """The final reply (usage as reported; the caller estimates it when there is none).

        Raises:
            StreamError: When the stream ended before its terminal event, the response failed,
                or a streamed function call never got a name.
        """
        if self.final is None:
            raise self._fail("stream ended before response.completed")
        data = {**self.final, "output": self._output(self.final)}
        failure = failure_message(data)
        if failure is not None:
            raise self._fail(f"response failed: {failure[:300]}")
        response = parse_response(data, self.provider, self.request_id)
        if any(not call.name for call in response.message.tool_calls):
            raise self._fail("streamed function call has no name")
        return replace(response, raw=None)

    def _fail(self, message: str) -> StreamError:
        return stream_error(self.provider, message, self.request_id)

    def _handle(self, name: str, data: str, out: list[StreamEvent]) -> None:
        try:
            payload = json.loads(data)
        except ValueError:
            raise self._fail(f"malformed stream event: {data[:120]!r}") from None
        if not isinstance(payload, dict):
            raise self._fail(f"stream event is not an object: {data[:120]!r}")
        if not isinstance(payload.get("type"), str):
            payload["type"] = "error" if "error" in payload else name
        self._handle_payload(payload, out)

    def _handle_payload(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        kind = payload["type"]
        if kind == "response.output_text.delta":  # the hot path: one event per piece of text
            delta = payload.get("delta")
            if isinstance(delta, str) and delta:
                if self.text_index is None:
                    self.text_index = self._index(payload)
                self.texts.append(delta)
                out.append(TextDelta(delta))
            return
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, payload, out)

    def _index(self, payload: dict[str, Any]) -> int:
        index = payload.get("output_index")
        if isinstance(index, int):
            return index
        known = self.by_id.get(str(payload.get("item_id")))
        return known if known is not None else -1

    def _refusal(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        payload["type"] = "response.output_text.delta"  # refusal text is reply text to us
        self._handle_payload(payload, out)

    def _reasoning(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        delta = payload.get("delta")
        if isinstance(delta, str) and delta:
            out.append(ReasoningDelta(delta))

    def _item(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        item = payload.get("item")
        if not isinstance(item, dict):
            raise self._fail(f"{payload.get('type')} without an item")
        index = self._index(payload)
        if index < 0:
            index = len(self.items)
        self.items[index] = item
        if isinstance(item.get("id"), str):
            self.by_id[item["id"]] = index
        if item.get("type") == "function_call" and index not in self.calls:
            position, call_id = len(self.calls), _string(item.get("call_id"))
            self.calls[index] = (position, call_id)
            name, arguments = _string(item.get("name")), _string(item.get("arguments")) or ""
            out.append(ToolCallDelta(position, call_id, name, arguments))

    def _arguments(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        delta = payload.get("delta")
        if isinstance(delta, str) and delta:
            index = self._index(payload)
            self.arguments.setdefault(index, []).append(delta)
            position, call_id = self.calls.setdefault(index, (len(self.calls), None))
            out.append(ToolCallDelta(position, call_id, None, delta))

    def _finished(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        response = payload.get("response")
        if not isinstance(response, dict):
            raise self._fail(f"{payload.get('type')} without a response object")
        self.final = response
        self.done = True

    def _failed(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        response = payload.get("response")
        failure = failure_message(response) if isinstance(response, dict) else None
        raise self._fail(f"response failed: {(failure or 'no details')[:300]}")

    def _error(self, payload: dict[str, Any], out: list[StreamEvent]) -> None:
        error = payload.get("error")
        details = error if isinstance(error, dict) else payload
        message, code = details.get("message"), details.get("code")
        text = str(message or error or "no details")[:300]
        raise self._fail(f"error event in stream: {text}" + (f" ({code})" if code else ""))

    def _output(self, final: dict[str, Any]) -> list[Any]:
        output = final.get("output")
        if isinstance(output, list) and output:
            return output
        rebuilt = []
        text_at = () if self.text_index is None else (self.text_index,)
        for index in sorted(self.items.keys() | self.arguments.keys() | set(text_at)):
            item = dict(self.items.get(index) or {})
            if index in text_at and not item.get("content"):
                item.setdefault("type", "message")
                item["content"] = [{"type": "output_text", "text": "".join(self.texts)}]
            if index in self.arguments and not item.get("arguments"):
                item.setdefault("type", "function_call")
                item["arguments"] = "".join(self.arguments[index])
            rebuilt.append(item)
        return rebuilt


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# Events named (by their ``event:`` line) as carrying nothing this parser needs are not decoded:
# the two echoes of the request at the start are most of a short reply's bytes.
_UNUSED: Final = frozenset(
    {
        "response.created",
        "response.in_progress",
        "response.queued",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.function_call_arguments.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.done",
    }
)
_Handler: TypeAlias = Callable[[ResponsesStreamParser, dict[str, Any], list[StreamEvent]], None]
_HANDLERS: Final[dict[str, _Handler]] = {
    "response.refusal.delta": ResponsesStreamParser._refusal,
    "response.reasoning_summary_text.delta": ResponsesStreamParser._reasoning,
    "response.reasoning_text.delta": ResponsesStreamParser._reasoning,
    "response.output_item.added": ResponsesStreamParser._item,
    "response.output_item.done": ResponsesStreamParser._item,
    "response.function_call_arguments.delta": ResponsesStreamParser._arguments,
    "response.completed": ResponsesStreamParser._finished,
    "response.incomplete": ResponsesStreamParser._finished,
    "response.failed": ResponsesStreamParser._failed,
    "error": ResponsesStreamParser._error,
}
