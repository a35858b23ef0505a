"""OpenAI Chat Completions wire format: request bodies and non-streamed replies."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

from ..._json import JSONObject
from ..._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from ..._usage import Usage
from .._base import Capabilities, LLMRequest, LLMResponse

__all__ = [
    "build_chat_body",
    "parse_chat_response",
    "reasoning_details",
    "wire_message",
]

_PASSTHROUGH = ("name",)


def _content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [p.to_part() for p in content]


def wire_message(message: Message, caps: Capabilities) -> JSONObject:
    """One message as chat completions accepts it (framework metadata left out)."""
    out: JSONObject = {"role": message.role}
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
    defaults: Mapping[str, object],
) -> dict[str, object]:
    """The JSON body of a ``/chat/completions`` call (the caller's ``params`` as they are
    given)."""
    body: dict[str, object] = {
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
