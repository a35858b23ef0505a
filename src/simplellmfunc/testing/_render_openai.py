"""OpenAI Chat Completions (``POST /v1/chat/completions``) as the mock server sends it.

The shapes follow what api.openai.com sends: a ``chat.completion`` object for non-streaming
requests; for ``"stream": true`` a ``chat.completion.chunk`` per event (the first carries
``delta.role``, the last a ``finish_reason``), an optional usage chunk with ``choices: []`` when
``stream_options.include_usage`` is set, then ``data: [DONE]``.
"""

from __future__ import annotations

import time
from typing import Any

from ._script import RecordedRequest, Reply, ToolCallSpec
from ._wire import EventStream, JsonBody, Rendered, SSEEvent, json_bytes, json_text

__all__ = ["ChatCompletionsRenderer", "error_body", "split_text"]

_FINGERPRINT = "fp_mock"
_DONE = SSEEvent("[DONE]")


def split_text(text: str, pieces: int) -> list[str]:
    """Cut ``text`` into at most ``pieces`` non-empty parts of near-equal length."""
    if not text:
        return []
    pieces = min(pieces, len(text))
    size, extra = divmod(len(text), pieces)
    parts, start = [], 0
    for i in range(pieces):
        end = start + size + (1 if i < extra else 0)
        parts.append(text[start:end])
        start = end
    return parts


def error_body(reply: Reply) -> JsonBody:
    """The body of an error reply: ``{"error": {...}}`` unless the reply gives its own."""
    if isinstance(reply.body, bytes | str):
        # A str is encoded by the plan, as the reply's ``surrogates`` option says.
        return JsonBody(reply.status, reply.body, "text/plain; charset=utf-8")
    if reply.body is not None:
        return JsonBody(reply.status, json_bytes(dict(reply.body)))
    error = {
        "message": reply.error_message,
        "type": reply.error_type,
        "param": None,
        "code": reply.error_code,
    }
    return JsonBody(reply.status, json_bytes({"error": error}))


def _usage(reply: Reply) -> dict[str, Any] | None:
    counts = reply.usage_counts()
    if counts is None:
        return None
    prompt, completion, cached, reasoning = counts
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


def _call_id(call: ToolCallSpec, seq: int, index: int) -> str:
    return call.id if call.id is not None else f"call_mock{seq}_{index}"


class ChatCompletionsRenderer:
    """Renders replies for ``/v1/chat/completions``."""

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Render ``reply`` as a JSON completion or an SSE stream, as the request asks."""
        if reply.kind == "error":
            return error_body(reply)
        body = request.json if isinstance(request.json, dict) else {}
        envelope = {
            "id": f"chatcmpl-mock{seq}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "mock-model"),
            "system_fingerprint": _FINGERPRINT,
        }
        if body.get("stream") is True and not reply.ignore_stream:
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and options.get("include_usage") is True
            return _Stream(reply, envelope, seq, include_usage).render()
        if reply.error_event is not None:
            return JsonBody(200, json_bytes({"error": dict(reply.error_event)}))
        return JsonBody(200, json_text(_completion(reply, envelope, seq)))


def _completion(reply: Reply, envelope: dict[str, Any], seq: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content if reply.content is not None or reply.calls else "",
        "refusal": None,
    }
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": _call_id(call, seq, i),
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json()},
            }
            for i, call in enumerate(reply.calls)
        ]
        if reply.delta_shape == "no_id":
            for call_dict in message["tool_calls"]:
                del call_dict["id"]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.effective_finish_reason,
    }
    completion = {**envelope, "choices": [choice]}
    usage = _usage(reply)
    if usage is not None:
        completion["usage"] = usage
    return completion


class _Stream:
    """Builds the chunk events of one streamed reply."""

    def __init__(self, reply: Reply, envelope: dict[str, Any], seq: int, usage: bool) -> None:
        self.reply = reply
        self.seq = seq
        self.include_usage = usage
        self.envelope = {**envelope, "object": "chat.completion.chunk"}
        # Chunks differ only in their delta and finish reason: encode the rest once.
        self.prefix = json_text(self.envelope)[:-1] + ',"choices":[{"index":0,"delta":'
        self.suffix = "}]" + (',"usage":null}' if usage else "}")

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> SSEEvent:
        middle = f',"logprobs":null,"finish_reason":{json_text(finish)}'
        return SSEEvent(self.prefix + json_text(delta) + middle + self.suffix)

    def render(self) -> EventStream:
        reply = self.reply
        head: list[SSEEvent] = []
        role_sent = bool(reply.content or reply.reasoning or not reply.calls)
        if role_sent:
            head.append(self.chunk({"role": "assistant", "content": "", "refusal": None}))
        for piece in split_text(reply.reasoning or "", reply.chunks):
            head.append(self.chunk({"reasoning_content": piece}))
        for piece in split_text(reply.content or "", reply.chunks):
            head.append(self.chunk({"content": piece}))
        for i, deltas in enumerate(self.tool_deltas()):
            for j, delta in enumerate(deltas):
                wrapper: dict[str, Any] = {"tool_calls": [delta]}
                if not role_sent and i == 0 and j == 0:
                    wrapper = {"role": "assistant", "content": None, **wrapper}
                head.append(self.chunk(wrapper))
        tail = [self.chunk({}, reply.effective_finish_reason)]
        usage = _usage(reply)
        if self.include_usage and usage is not None:
            last = {**self.envelope, "choices": [], "usage": usage}
            tail.append(SSEEvent(json_text(last)))
        tail.append(_DONE)
        error = None
        if reply.error_event is not None:
            name = "error" if reply.error_event_style == "event" else None
            error = SSEEvent(json_text({"error": dict(reply.error_event)}), name)
        return EventStream(head, tail, error, self.chunk({"content": "."}))

    def tool_deltas(self) -> list[list[dict[str, Any]]]:
        """The deltas of each call, shaped as ``reply.delta_shape`` says."""
        shape = self.reply.delta_shape
        result = []
        for i, call in enumerate(self.reply.calls):
            ident = {"id": _call_id(call, self.seq, i), "type": "function"}
            index = {"index": 0 if shape == "all_index_0" else i}
            if shape == "no_index":
                index = {}
            if shape == "no_id":
                ident = {"type": "function"}
            deltas = [{**index, **ident, "function": {"name": call.name, "arguments": ""}}]
            for piece in split_text(call.arguments_json(), self.reply.chunks):
                if shape == "repeat_id_name":
                    function = {"name": call.name, "arguments": piece}
                    deltas.append({**index, **ident, "function": function})
                else:
                    deltas.append({**index, "function": {"arguments": piece}})
            result.append(deltas)
        return result
