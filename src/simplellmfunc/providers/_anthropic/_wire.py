"""Anthropic Messages API wire format: request bodies, replies, usage and stop reasons.

The Messages API differs from chat completions in ways this module hides from the engine: the
system prompt is a top-level field; tool calls are ``tool_use`` content blocks and their results
``tool_result`` blocks inside a *user* message; roles must alternate (consecutive messages of one
role are merged); images are ``image`` blocks with a ``base64`` or ``url`` source; reasoning
comes as ``thinking`` blocks whose signature must be sent back unchanged.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, TypedDict
from urllib.parse import unquote_to_bytes

from ..._content import ImgPath, ImgUrl, Text
from ..._json import JSONObject, JSONValue
from ..._messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage
from ..._usage import Usage
from ...exceptions import StreamError
from .._assembly import parse_arguments
from .._base import Capabilities, LLMRequest, LLMResponse, ToolSpec
from .._stream import stream_error

__all__ = [
    "REASONING_BLOCKS",
    "build_messages_body",
    "error_event",
    "finish_reason",
    "mark_truncated",
    "parse_messages_response",
    "usage_from_anthropic",
    "wire_messages",
]

# Stop reasons in the vocabulary the engine and the OpenAI adapters use.
_FINISH: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
_TOOL_CHOICE: Final = {"auto": "auto", "required": "any", "any": "any", "none": "none"}
_RETRYABLE_ERRORS: Final = frozenset({"overloaded_error", "api_error", "rate_limit_error"})
# Reasoning blocks sent back as they came (the API checks their signature).
REASONING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})

Block = JSONObject
"""A content block, a tool or a tool choice of a request."""


class Turn(TypedDict):
    """One turn of a request's ``messages``: a role and its blocks (one text block in its
    short form, the text)."""

    role: Literal["user", "assistant"]
    content: Sequence[Block] | str


def finish_reason(stop_reason: Any) -> str | None:
    """Map an Anthropic ``stop_reason`` to a finish reason (unknown ones pass through)."""
    if not isinstance(stop_reason, str) or not stop_reason:
        return None
    return _FINISH.get(stop_reason, stop_reason)


def usage_from_anthropic(data: Mapping[str, Any]) -> Usage:
    """Read an Anthropic ``usage`` object; cache reads and writes count as prompt tokens."""
    cache_read = int(data.get("cache_read_input_tokens") or 0)
    prompt = int(data.get("input_tokens") or 0)
    prompt += int(data.get("cache_creation_input_tokens") or 0) + cache_read
    completion = int(data.get("output_tokens") or 0)
    return Usage(prompt, completion, prompt + completion, cached_tokens=cache_read, calls=1)


# -- requests ------------------------------------------------------------------------------------


def _image(part: ImgUrl) -> Block:
    url = part.url
    if not url.startswith("data:"):
        return {"type": "image", "source": {"type": "url", "url": url}}
    header, _, payload = url[5:].partition(",")
    media_type, *params = header.split(";")
    data = payload if "base64" in params else base64.b64encode(unquote_to_bytes(payload)).decode()
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def _blocks(content: str | Sequence[Any]) -> list[Block]:
    """User or tool-result content as content blocks (empty text left out: the API rejects it)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[Block] = []
    for part in content:
        if isinstance(part, Text):
            if part.text:
                blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImgPath):
            blocks.append(_image(part.to_img_url()))
        elif isinstance(part, ImgUrl):
            blocks.append(_image(part))
    return blocks


def _tool_input(call: ToolCall) -> JSONObject:
    arguments, _problem = parse_arguments(call.arguments)
    return arguments if arguments is not None else {}  # broken arguments cannot be sent back


def _assistant_blocks(message: AssistantMessage) -> list[Block]:
    blocks: list[Block] = [
        dict(detail)
        for detail in message.reasoning_details
        if detail.get("type") in REASONING_BLOCKS
    ]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        )
    return blocks


def _tool_result(message: ToolMessage) -> Block:
    block: Block = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if isinstance(message.content, str):
        block["content"] = message.content
    else:
        block["content"] = _blocks(message.content)
    return block


def wire_messages(messages: Sequence[Message]) -> tuple[str | None, list[Turn]]:
    """Split ``messages`` into the top-level ``system`` text and alternating Messages turns.

    Tool results become ``tool_result`` blocks of a user turn; consecutive turns of one role are
    merged into one (so the results of one tool batch share a message); messages with nothing to
    send (an aborted empty reply) are left out.
    """
    system = [m.content for m in messages if isinstance(m, SystemMessage) and m.content]
    grouped: list[tuple[Literal["user", "assistant"], list[Block]]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role: Literal["user", "assistant"]
        if isinstance(message, AssistantMessage):
            role, blocks = "assistant", _assistant_blocks(message)
        elif isinstance(message, ToolMessage):
            role, blocks = "user", [_tool_result(message)]
        else:
            role, blocks = "user", _blocks(message.content)
        if not blocks:
            continue
        if grouped and grouped[-1][0] == role:
            grouped[-1][1].extend(blocks)
        else:
            grouped.append((role, blocks))
    turns = [Turn(role=role, content=_short(blocks)) for role, blocks in grouped]
    return ("\n\n".join(system) or None), turns


def _short(blocks: list[Block]) -> list[Block] | str:
    """A turn of one text block in its short form, the text (as people write it)."""
    if len(blocks) == 1:
        text = blocks[0].get("text")
        if isinstance(text, str) and blocks[0] == {"type": "text", "text": text}:
            return text
    return blocks


def _tool(spec: ToolSpec) -> Block:
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": dict(spec.parameters),
    }


def _tool_choice(choice: str | Mapping[str, JSONValue], parallel: bool) -> Block:
    function = None if isinstance(choice, str) else choice.get("function")
    out: Block
    if isinstance(choice, str):
        out = {"type": _TOOL_CHOICE.get(choice, choice)}
    elif choice.get("type") == "function" and isinstance(function, Mapping):
        out = {"type": "tool", "name": function.get("name")}  # the OpenAI shape
    else:
        out = dict(choice)
    if not parallel and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def _params(params: Mapping[str, object]) -> dict[str, object]:
    """Body parameters, with the chat-completions names the Messages API spells differently."""
    out = dict(params)
    if "max_completion_tokens" in out:
        out["max_tokens"] = out.pop("max_completion_tokens")
    if "stop" in out:
        stop = out.pop("stop")
        out["stop_sequences"] = [stop] if isinstance(stop, str) else stop
    return out


def build_messages_body(
    request: LLMRequest,
    *,
    model: str,
    caps: Capabilities,
    stream: bool,
    max_tokens: int,
    defaults: Mapping[str, object],
) -> dict[str, object]:
    """The JSON body of a ``/messages`` call (``max_tokens`` is required by the API)."""
    system, messages = wire_messages(request.messages)
    body: dict[str, object] = {"model": model, "max_tokens": max_tokens, "messages": messages}
    if system is not None:
        body["system"] = system
    if request.tools and caps.native_tools:
        body["tools"] = [_tool(t) for t in request.tools]
        choice = request.tool_choice
        if choice is not None or not caps.parallel_tool_calls:
            body["tool_choice"] = _tool_choice(choice or "auto", caps.parallel_tool_calls)
    if stream:
        body["stream"] = True
    body.update(_params(defaults))
    body.update(_params(request.params))
    return body


# -- replies -------------------------------------------------------------------------------------


def mark_truncated(call: ToolCall) -> ToolCall:
    """Make sure the arguments of a call cut by ``max_tokens`` read as truncated JSON.

    What arrived is kept; when it happens to parse (nothing arrived, or a non-streamed reply whose
    ``input`` the server completed), its closing character is dropped so that
    :func:`parse_arguments` reports truncation and the engine does not run the tool.
    """
    arguments = call.arguments.strip()
    value, _problem = parse_arguments(arguments)
    if value is None:
        return call
    text = "{" if not arguments else arguments[:-1]
    return ToolCall(call.id, call.name, text)


def reasoning_detail(block: Mapping[str, Any]) -> Mapping[str, Any]:
    """A thinking block as kept in ``reasoning_details`` (read-only, sent back verbatim)."""
    return MappingProxyType({k: v for k, v in block.items() if k != "index"})


def parse_messages_response(
    data: Mapping[str, Any], provider: str, request_id: str | None
) -> LLMResponse | None:
    """Parse a non-streamed Messages reply; ``None`` if it has no ``content`` list."""
    content = data.get("content")
    if not isinstance(content, list):
        return None
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Mapping[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(
                ToolCall(str(block.get("id") or ""), str(block.get("name") or ""), arguments)
            )
        elif kind in REASONING_BLOCKS:
            reasoning.append(reasoning_detail(block))
    finish = finish_reason(data.get("stop_reason"))
    last = content[-1] if content and isinstance(content[-1], dict) else {}
    if finish == "length" and calls and last.get("type") == "tool_use":
        calls[-1] = mark_truncated(calls[-1])
    usage = data.get("usage")
    return LLMResponse(
        message=AssistantMessage("".join(texts) or None, tuple(calls), tuple(reasoning)),
        finish_reason=finish,
        usage=usage_from_anthropic(usage) if isinstance(usage, dict) else Usage(),
        model=str(data.get("model") or ""),
        request_id=request_id or data.get("id"),
        provider=provider,
        raw=data,
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
    return stream_error(provider, message, request_id, retryable=kind in _RETRYABLE_ERRORS)
