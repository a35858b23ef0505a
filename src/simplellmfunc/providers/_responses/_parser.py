"""The Responses API event stream: SSE events in, stream events and the final reply out.

The final reply is the response object that the terminal ``response.completed`` (or
``response.incomplete``) event carries; ``error`` and ``response.failed`` events end the stream
with an error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, Final, TypeAlias

from ..._unicode import loads_reply
from ...exceptions import StreamError
from .._base import LLMResponse, ReasoningDelta, StreamEvent, TextDelta, ToolCallDelta
from .._sse import SSEDecoder
from .._stream import stream_error
from ._wire import failure_message, parse_response

__all__ = ["ResponsesStreamParser"]


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
        if not data or data.isspace():  # a bare ``data:`` line: an event that carries nothing
            if name == "error":
                self._error({"type": "error"}, out)
            return
        try:
            payload = loads_reply(data)
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


def _string(value: object) -> str | None:
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
