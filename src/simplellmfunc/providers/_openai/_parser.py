"""The Chat Completions event stream: SSE events in, stream events and the assembled reply out.

Each event is one ``chat.completion.chunk`` (a ``delta`` of the first choice, ``usage`` in the
last one when asked for); ``data: [DONE]`` ends the stream.
"""

from __future__ import annotations

from typing import Any

from ..._messages import AssistantMessage
from ..._usage import Usage
from ...exceptions import StreamError
from .._assembly import ToolCallAssembler
from .._base import LLMResponse, ReasoningDelta, StreamEvent, TextDelta
from .._sse import ServerSentEvent, SSEDecoder
from .._stream import stream_error
from .._unicode import loads_reply
from ._wire import reasoning_details

__all__ = ["ChatStreamParser"]


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

        An event with empty data (the SSE algorithm dispatches one for a bare ``data:`` line)
        carries nothing and is skipped, unless it is an ``error`` event.

        Raises:
            StreamError: For an ``error`` event, an ``{"error": ...}`` chunk or a malformed one.
        """
        out: list[StreamEvent] = []
        for sse in events:
            if self.done:
                break
            data = sse.data
            if data == "[DONE]":
                self.done = True
            elif (data and not data.isspace()) or sse.event == "error":
                self._handle(sse.event, data, out)
        return out

    def _fail(self, message: str) -> StreamError:
        return stream_error(self.provider, message, self.request_id)

    def _decode(self, event: str, data: str) -> dict[str, Any]:
        if event == "error":
            raise self._fail(f"error event in stream: {data[:300]}")
        try:
            chunk = loads_reply(data)
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
