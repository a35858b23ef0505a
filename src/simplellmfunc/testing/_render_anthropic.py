"""Anthropic Messages (``POST /v1/messages`` and ``/v1/messages/count_tokens``) as the mock
server sends it.

The shapes follow what api.anthropic.com sends: a ``message`` object for non-streaming requests;
for ``"stream": true`` named SSE events (``message_start``, ``content_block_start``, ``ping``,
``content_block_delta`` with ``thinking_delta`` / ``signature_delta`` / ``text_delta`` /
``input_json_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``); errors as
``{"type": "error", "error": {"type", "message"}}``, also as an ``error`` event after a 200.
Requests are checked the way the API checks them (``max_tokens`` required, only ``user`` and
``assistant`` roles, every ``tool_result`` answering a ``tool_use`` of the turn before), and a bad
one gets the API's 400.

Reply mapping: ``reasoning`` becomes a ``thinking`` block (with a made-up signature), ``content``
a ``text`` block, each call a ``tool_use`` block; finish reasons map to stop reasons (``stop`` →
``end_turn``, ``tool_calls`` → ``tool_use``, ``length`` → ``max_tokens``); ``delta_shape`` has no
meaning here. In drip mode the stream sends ``message_start`` and then a ``text_delta`` of ``"."``
forever (no ``content_block_start``: the stream never gets that far in one piece).
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from ._render_openai import error_body, split_text
from ._script import RecordedRequest, Reply, ToolCallSpec
from ._wire import EventStream, JsonBody, Rendered, SSEEvent, json_bytes, json_text

__all__ = ["CountTokensRenderer", "MessagesRenderer"]

_STOP: Final = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_PING: Final = SSEEvent('{"type":"ping"}', "ping")
_STOP_EVENT: Final = SSEEvent('{"type":"message_stop"}', "message_stop")


def _error(status: int, kind: str, message: str) -> JsonBody:
    error = {"type": "error", "error": {"type": kind, "message": message}}
    return JsonBody(status, json_bytes(error))


def _error_reply(reply: Reply) -> JsonBody:
    if reply.body is not None:
        return error_body(reply)  # a raw body, sent as given
    kind = reply.error_type or "api_error"
    if kind == "server_error":  # the generic 5xx name of the scripts; Anthropic's names:
        kind = "overloaded_error" if reply.status == 529 else "api_error"
    return _error(reply.status, kind, reply.error_message)


def _tool_use_ids(message: Any) -> set[str]:
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return set()
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return {str(b.get("id")) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}


def _check_messages(messages: Any) -> str | None:
    """The API's complaint about ``messages``, or ``None``."""
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        content = message.get("content")
        if not isinstance(content, str | list):
            return f"messages.{i}.content: Input should be a valid list"
        blocks = content if isinstance(content, list) else []
        if any(not isinstance(b, dict) or not isinstance(b.get("type"), str) for b in blocks):
            return f"messages.{i}.content: every block needs a type"
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        uses = _tool_use_ids(messages[i - 1]) if i else set()
        if results - uses:
            return (
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                f"{sorted(map(str, results - uses))}. Each `tool_result` block must have a "
                "corresponding `tool_use` block in the previous message."
            )
        pending = _tool_use_ids(message)
        if pending and i + 1 < len(messages):
            following = messages[i + 1].get("content") if isinstance(messages[i + 1], dict) else ()
            answered = {
                b.get("tool_use_id")
                for b in (following if isinstance(following, list) else ())
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            if pending - answered:
                return (
                    "messages: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {sorted(map(str, pending - answered))}"
                )
    return None


def _check(body: dict[str, Any], needs_max_tokens: bool) -> str | None:
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if needs_max_tokens and (not isinstance(max_tokens, int) or max_tokens < 1):
        return "max_tokens: Field required (an integer >= 1)"
    if "system" in body and not isinstance(body["system"], str | list):
        return "system: Input should be a valid string or list"
    return _check_messages(body.get("messages"))


def _stop_reason(reply: Reply) -> str:
    reason = reply.effective_finish_reason
    return _STOP.get(reason, reason)


def _usage(reply: Reply, output: int | None = None) -> dict[str, int] | None:
    counts = reply.usage_counts()
    if counts is None:
        return None
    prompt, completion, cached, _reasoning = counts
    return {
        "input_tokens": prompt - cached,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": completion if output is None else output,
    }


def _call_id(call: ToolCallSpec, seq: int, index: int) -> str:
    return call.id if call.id is not None else f"toolu_mock{seq}_{index}"


def _input(call: ToolCallSpec) -> dict[str, Any]:
    """The ``input`` object of a non-streamed call (a raw string that is no object: ``{}``)."""
    if not isinstance(call.arguments, str):
        return dict(call.arguments)
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _signature(seq: int) -> str:
    return f"sig_mock{seq}"


class MessagesRenderer:
    """Renders replies for ``/v1/messages``."""

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Render ``reply`` as a Messages JSON reply or SSE stream, as the request asks."""
        if reply.kind == "error":
            return _error_reply(reply)
        body = request.json if isinstance(request.json, dict) else {}
        problem = _check(body, needs_max_tokens=True)
        if problem is not None:
            return _error(400, "invalid_request_error", problem)
        envelope = {
            "id": f"msg_mock{seq}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
        }
        if body.get("stream") is True and not reply.ignore_stream:
            return _Stream(reply, envelope, seq).render()
        if reply.error_event is not None:
            return JsonBody(200, json_bytes({"type": "error", "error": dict(reply.error_event)}))
        return JsonBody(200, json_text(_message(reply, envelope, seq)))


def _message(reply: Reply, envelope: dict[str, Any], seq: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning:
        thinking = {"type": "thinking", "thinking": reply.reasoning, "signature": _signature(seq)}
        content.append(thinking)
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for i, call in enumerate(reply.calls):
        tool_use = {"type": "tool_use", "id": _call_id(call, seq, i), "name": call.name}
        content.append({**tool_use, "input": _input(call)})
    message = {
        **envelope,
        "content": content,
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
    }
    usage = _usage(reply)
    if usage is not None:
        message["usage"] = usage
    return message


class _Stream:
    """Builds the events of one streamed reply."""

    def __init__(self, reply: Reply, envelope: dict[str, Any], seq: int) -> None:
        self.reply = reply
        self.envelope = envelope
        self.seq = seq
        self.index = -1

    @staticmethod
    def event(name: str, payload: dict[str, Any]) -> SSEEvent:
        return SSEEvent(json_text({"type": name, **payload}), name)

    def delta(self, delta: dict[str, Any]) -> SSEEvent:
        return self.event("content_block_delta", {"index": self.index, "delta": delta})

    def block(self, start: dict[str, Any], deltas: list[dict[str, Any]]) -> list[SSEEvent]:
        self.index += 1
        events = [self.event("content_block_start", {"index": self.index, "content_block": start})]
        if self.index == 0:
            events.append(_PING)  # where the API sends its first ping
        events.extend(self.delta(d) for d in deltas)
        events.append(self.event("content_block_stop", {"index": self.index}))
        return events

    def render(self) -> EventStream:
        reply = self.reply
        chunks = reply.chunks
        message = {**self.envelope, "content": [], "stop_reason": None, "stop_sequence": None}
        usage = _usage(reply, output=1)
        if usage is not None:
            message["usage"] = usage
        head = [self.event("message_start", {"message": message})]
        if reply.reasoning:
            deltas = [
                {"type": "thinking_delta", "thinking": p}
                for p in split_text(reply.reasoning, chunks)
            ]
            deltas.append({"type": "signature_delta", "signature": _signature(self.seq)})
            head += self.block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
        if reply.content:
            deltas = [{"type": "text_delta", "text": p} for p in split_text(reply.content, chunks)]
            head += self.block({"type": "text", "text": ""}, deltas)
        for i, call in enumerate(reply.calls):
            start = {
                "type": "tool_use",
                "id": _call_id(call, self.seq, i),
                "name": call.name,
                "input": {},
            }
            pieces = ["", *split_text(call.arguments_json(), chunks)]
            head += self.block(
                start, [{"type": "input_json_delta", "partial_json": p} for p in pieces]
            )
        final: dict[str, Any] = {
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None}
        }
        output = _usage(reply)
        if output is not None:
            final["usage"] = {"output_tokens": output["output_tokens"]}
        tail = [self.event("message_delta", final), _STOP_EVENT]
        error = None
        if reply.error_event is not None:
            payload = json_text({"type": "error", "error": dict(reply.error_event)})
            error = SSEEvent(payload, "error" if reply.error_event_style == "event" else None)
        self.index = 0
        drip = self.delta({"type": "text_delta", "text": "."})
        return EventStream(head, tail, error, drip)


class CountTokensRenderer:
    """Renders ``/v1/messages/count_tokens``: ``{"input_tokens": n}``, whatever is scripted.

    ``n`` is ``ceil(len(json) / 4)`` over the request's ``system``, ``messages`` and ``tools``
    (compact JSON), a deterministic stand-in for the real tokenizer. The server answers it
    without consuming a scripted reply (``scripted = False``).
    """

    scripted = False

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Count the request's tokens (a 400 for a request the API would refuse)."""
        body = request.json if isinstance(request.json, dict) else {}
        problem = _check(body, needs_max_tokens=False)
        if problem is not None:
            return _error(400, "invalid_request_error", problem)
        counted = {k: body[k] for k in ("system", "messages", "tools") if k in body}
        return JsonBody(200, json_bytes({"input_tokens": math.ceil(len(json_text(counted)) / 4)}))
