"""The OpenAI Responses API (``POST /v1/responses``) as the mock server sends it.

The shapes follow what api.openai.com sends. Without ``"stream": true``: one ``response`` object
whose ``output`` holds a ``reasoning`` item (when the reply has reasoning), a ``message`` item with
one ``output_text`` part (when it has text) and a ``function_call`` item per tool call. With it:
``event:``/``data:`` pairs, each payload carrying its ``type`` and a ``sequence_number`` counted
from 0, in this order::

    response.created, response.in_progress
    per output item: response.output_item.added
        reasoning: response.reasoning_summary_part.added, ...summary_text.delta (per piece),
                   ...summary_text.done, ...summary_part.done
        message:   response.content_part.added, response.output_text.delta (per piece),
                   response.output_text.done, response.content_part.done
        call:      response.function_call_arguments.delta (per piece), ...arguments.done
    response.output_item.done
    response.completed (or response.incomplete when the finish reason is "length")

There is no ``[DONE]``: the body ends after the last event. An ``error_event`` becomes an
``error`` event (``{"type": "error", "code", "message", "param"}``), with an ``event:`` line for
``error_event_style="event"`` and without one for ``"data"``; a non-streamed reply with an
``error_event`` is a 200 ``response`` object with ``status: "failed"``. ``delta_shape`` does not
apply (this API always streams whole items with ids).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any, Final

from ._render_openai import error_body, split_text
from ._script import RecordedRequest, Reply, ToolCallSpec
from ._wire import EventStream, JsonBody, Rendered, SSEEvent, json_text

__all__ = ["ResponsesRenderer"]

_ENCRYPTED: Final = "reasoning.encrypted_content"
_INCOMPLETE: Final = {"length": "max_output_tokens", "content_filter": "content_filter"}
# Request fields a response object echoes, with the API's defaults.
_ECHOED: Final[dict[str, Any]] = {
    "instructions": None,
    "max_output_tokens": None,
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "reasoning": {"effort": None, "summary": None},
    "store": True,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": 1.0,
    "truncation": "disabled",
    "user": None,
    "metadata": {},
}


def _usage(reply: Reply) -> dict[str, Any] | None:
    counts = reply.usage_counts()
    if counts is None:
        return None
    prompt, completion, cached, reasoning = counts
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + completion,
    }


def _call_id(call: ToolCallSpec, seq: int, index: int) -> str:
    return call.id if call.id is not None else f"call_mock{seq}_{index}"


class ResponsesRenderer:
    """Renders replies for ``/v1/responses``."""

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Render ``reply`` as a response object or an SSE event stream, as the request asks."""
        if reply.kind == "error":
            return error_body(reply)
        body = request.json if isinstance(request.json, dict) else {}
        build = _Builder(reply, body, seq)
        if body.get("stream") is True and not reply.ignore_stream:
            return build.stream()
        return JsonBody(200, json_text(build.response(final=True)))


class _Builder:
    """The items, events and response objects of one reply."""

    def __init__(self, reply: Reply, body: dict[str, Any], seq: int) -> None:
        self.reply = reply
        self.seq = seq
        self.id = f"resp_mock{seq}"
        self.created = int(time.time())
        self.model = str(body.get("model") or "mock-model")
        self.echo = {key: body.get(key, default) for key, default in _ECHOED.items()}
        include = body.get("include")
        self.encrypted = isinstance(include, list) and _ENCRYPTED in include
        self.sequence = 0

    # -- items --------------------------------------------------------------------------------

    def reasoning_item(self, done: bool) -> dict[str, Any]:
        text = self.reply.reasoning or ""
        item: dict[str, Any] = {"id": f"rs_mock{self.seq}", "type": "reasoning", "summary": []}
        if done:
            item["summary"] = [{"type": "summary_text", "text": text}]
        if self.encrypted:  # opaque to clients: any string the server can read back will do
            raw = text.encode("utf-8", "surrogatepass")
            item["encrypted_content"] = base64.b64encode(raw).decode() if done else None
        return item

    def message_item(self, done: bool) -> dict[str, Any]:
        parts = [self.text_part(self.reply.content or "")] if done else []
        return {
            "id": f"msg_mock{self.seq}",
            "type": "message",
            "status": "completed" if done else "in_progress",
            "content": parts,
            "role": "assistant",
        }

    def call_item(self, index: int, done: bool) -> dict[str, Any]:
        call = self.reply.calls[index]
        return {
            "id": f"fc_mock{self.seq}_{index}",
            "type": "function_call",
            "status": "completed" if done else "in_progress",
            "arguments": call.arguments_json() if done else "",
            "call_id": _call_id(call, self.seq, index),
            "name": call.name,
        }

    @staticmethod
    def text_part(text: str) -> dict[str, Any]:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def output(self) -> list[dict[str, Any]]:
        items = [self.reasoning_item(True)] if self.reply.reasoning is not None else []
        if self.reply.content is not None or not self.reply.calls:
            items.append(self.message_item(True))
        items.extend(self.call_item(i, True) for i in range(len(self.reply.calls)))
        return items

    def response(self, *, final: bool) -> dict[str, Any]:
        """The response object: in progress and empty, or finished."""
        reply = self.reply
        status, incomplete, error = "in_progress", None, None
        if final:
            reason = _INCOMPLETE.get(reply.effective_finish_reason)
            status = "completed" if reason is None else "incomplete"
            incomplete = None if reason is None else {"reason": reason}
            if reply.error_event is not None:
                status, error = "failed", {"code": "server_error", **reply.error_event}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "background": False,
            "error": error,
            "incomplete_details": incomplete,
            "model": self.model,
            "output": self.output() if final else [],
            **self.echo,
            "usage": _usage(reply) if final else None,
        }

    # -- events -------------------------------------------------------------------------------

    def event(self, kind: str, **fields: Any) -> SSEEvent:
        data = json_text({"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return SSEEvent(data, kind)

    def stream(self) -> EventStream:
        reply = self.reply
        head = [
            self.event("response.created", response=self.response(final=False)),
            self.event("response.in_progress", response=self.response(final=False)),
        ]
        index = 0
        if reply.reasoning is not None:
            head.extend(self.reasoning_events(index))
            index += 1
        if reply.content is not None or not reply.calls:
            head.extend(self.message_events(index))
            index += 1
        for n in range(len(reply.calls)):
            head.extend(self.call_events(index, n))
            index += 1
        final = self.response(final=True)
        incomplete = final["status"] == "incomplete"
        terminal = "response.incomplete" if incomplete else "response.completed"
        error = None
        if reply.error_event is not None:
            error = self.error_event()
        tail = [self.event(terminal, response=final)]
        # Drip mode repeats one event forever after response.created (its number stays fixed).
        where = {"item_id": f"msg_mock{self.seq}", "output_index": 0, "content_index": 0}
        drip = self.event("response.output_text.delta", **where, delta=".", logprobs=[])
        return EventStream(head, tail, error, drip)

    def error_event(self) -> SSEEvent:
        details = dict(self.reply.error_event or {})
        fields = {
            "code": details.pop("code", None),
            "message": details.pop("message", ""),
            "param": details.pop("param", None),
            **details,
        }
        event = self.event("error", **fields)
        return event if self.reply.error_event_style == "event" else SSEEvent(event.data)

    def item_event(self, stage: str, index: int, item: dict[str, Any]) -> SSEEvent:
        return self.event(f"response.output_item.{stage}", output_index=index, item=item)

    def reasoning_events(self, index: int) -> Iterator[SSEEvent]:
        item_id, text = f"rs_mock{self.seq}", self.reply.reasoning or ""
        where = {"item_id": item_id, "output_index": index, "summary_index": 0}
        part = {"type": "summary_text", "text": ""}
        yield self.item_event("added", index, self.reasoning_item(False))
        yield self.event("response.reasoning_summary_part.added", **where, part=part)
        for piece in split_text(text, self.reply.chunks):
            yield self.event("response.reasoning_summary_text.delta", **where, delta=piece)
        yield self.event("response.reasoning_summary_text.done", **where, text=text)
        done = {**part, "text": text}
        yield self.event("response.reasoning_summary_part.done", **where, part=done)
        yield self.item_event("done", index, self.reasoning_item(True))

    def message_events(self, index: int) -> Iterator[SSEEvent]:
        text = self.reply.content or ""
        where = {"item_id": f"msg_mock{self.seq}", "output_index": index, "content_index": 0}
        yield self.item_event("added", index, self.message_item(False))
        yield self.event("response.content_part.added", **where, part=self.text_part(""))
        for piece in split_text(text, self.reply.chunks):
            yield self.event("response.output_text.delta", **where, delta=piece, logprobs=[])
        yield self.event("response.output_text.done", **where, text=text, logprobs=[])
        yield self.event("response.content_part.done", **where, part=self.text_part(text))
        yield self.item_event("done", index, self.message_item(True))

    def call_events(self, index: int, n: int) -> Iterator[SSEEvent]:
        where = {"item_id": f"fc_mock{self.seq}_{n}", "output_index": index}
        arguments = self.reply.calls[n].arguments_json()
        yield self.item_event("added", index, self.call_item(n, False))
        for piece in split_text(arguments, self.reply.chunks):
            yield self.event("response.function_call_arguments.delta", **where, delta=piece)
        yield self.event("response.function_call_arguments.done", **where, arguments=arguments)
        yield self.item_event("done", index, self.call_item(n, True))
