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

Streams are parsed in ``_parser``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from ..._content import ContentPart, ImgPath, Text
from ..._json import JSONObject, JSONValue
from ..._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from ..._usage import Usage
from .._base import Capabilities, LLMRequest, LLMResponse

__all__ = [
    "ITEM_ORDER",
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


def _part(part: ContentPart) -> JSONObject:
    if isinstance(part, Text):
        return {"type": "input_text", "text": part.text}
    image = part.to_img_url() if isinstance(part, ImgPath) else part
    return {"type": "input_image", "image_url": image.url, "detail": image.detail}


def _input_content(content: str | tuple[ContentPart, ...]) -> list[JSONObject]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return [_part(p) for p in content]


def _tool_output(message: ToolMessage) -> str | list[JSONObject]:
    content = message.content
    if isinstance(content, str) or all(isinstance(p, Text) for p in content):
        return message.text  # the common case: plain text, as every server accepts it
    return [_part(p) for p in content]


def _assistant_text(text: str, item_id: str | None) -> JSONObject:
    item: JSONObject = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    if item_id is not None:  # an output message as the API returned it: id and status go back
        item["id"] = item_id
        item["status"] = "completed"
    return item


def _function_call(call: ToolCall, item_id: str | None) -> JSONObject:
    item: JSONObject = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }
    if item_id is not None:
        item["id"] = item_id
    return item


def _assistant_items(message: AssistantMessage) -> Iterator[JSONObject]:
    """The items of one assistant turn, in the order the model produced them when known."""
    reasoning: dict[str, JSONObject] = {}
    order: Sequence[Mapping[str, JSONValue]] = ()
    loose: list[JSONObject] = []
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


def input_items(messages: Sequence[Message]) -> tuple[str | None, list[JSONObject]]:
    """Split a transcript into ``instructions`` and the ``input`` items."""
    instructions: str | None = None
    items: list[JSONObject] = []
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


def _tool_choice(choice: str | Mapping[str, JSONValue]) -> str | JSONObject:
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
    defaults: Mapping[str, object],
) -> dict[str, object]:
    """The JSON body of a ``/responses`` call (the caller's ``params`` as they are given)."""
    instructions, items = input_items(request.messages)
    body: dict[str, object] = {"model": model, "input": items}
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


def _merge_params(body: dict[str, object], params: Mapping[str, object]) -> None:
    for key, value in params.items():
        if key in _MAX_TOKEN_ALIASES:
            body.setdefault("max_output_tokens", value)
        elif (
            key == "text"
            and isinstance(value, Mapping)
            and isinstance(text := body.get("text"), dict)
        ):
            body["text"] = {**text, **value}  # e.g. verbosity next to the schema format
        else:
            body[key] = value


# -- response --------------------------------------------------------------------------------------


def _arguments(value: object) -> str:
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


def parse_output(output: Sequence[object]) -> AssistantMessage:
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


def failure_message(data: Mapping[str, object]) -> str | None:
    """The error of a failed response object, or ``None`` when it did not fail."""
    error = data.get("error")
    if data.get("status") != "failed" and not error:
        return None
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        text = str(message) if message else "response failed"
        return f"{text} ({code})" if code else text
    return str(error) if error else "response failed"


def _finish_reason(data: Mapping[str, object], has_calls: bool) -> str:
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
