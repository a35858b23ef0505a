"""The Chat Completions event stream: SSE events in, stream events and the assembled reply out.

Each event is one ``chat.completion.chunk`` (a ``delta`` of the first choice, ``usage`` in the
last one when asked for); ``data: [DONE]`` ends the stream.
"""

from __future__ import annotations

from ..._messages import AssistantMessage
from ..._unicode import loads_reply
from ..._usage import Usage
from ...exceptions import StreamError
from .._assembly import ToolCallAssembler
from .._base import LLMResponse, ReasoningDelta, StreamEvent, TextDelta
from .._sse import ServerSentEvent, SSEDecoder
from .._stream import stream_error
from ._wire import reasoning_details

__all__ = ["ChatStreamParser"]


class ChatStreamParser:
    """Turns the SSE events of a streamed completion into stream events and the final reply.

    Every chunk passes through here, so it does no more than it must: the SSE decoder's fast
    path for whole ``data:`` events, one JSON decode per event, the delta read inline, and a
    tool-call assembler only once a tool call shows up.

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
        data = self.decoder.feed_data(chunk)  # the common shape: whole data-only events
        if data is None:
            return self.feed(self.decoder.feed(chunk))
        out: list[StreamEvent] = []
        for item in data:
            if self.done:
                break
            self._take("message", item, out)
        return out

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
            self._take(sse.event, sse.data, out)
        return out

    def _fail(self, message: str) -> StreamError:
        return stream_error(self.provider, message, self.request_id)

    def _take(self, event: str, data: str, out: list[StreamEvent]) -> None:
        """One SSE event: ``[DONE]``, nothing (empty data), or a chunk; every chunk passes
        here, so the decoding and the reading of the delta are inline."""
        if data == "[DONE]":
            self.done = True
            return
        if event == "error":
            raise self._fail(f"error event in stream: {data[:300]}")
        if not data or data.isspace():
            return
        try:
            chunk = loads_reply(data)
        except ValueError:
            raise self._fail(f"malformed stream chunk: {data[:120]!r}") from None
        if type(chunk) is not dict:  # json gives plain dicts: no isinstance needed
            raise self._fail(f"stream chunk is not an object: {data[:120]!r}")
        # Keys that most chunks lack are tested with ``in`` (no method call).
        if "error" in chunk and (error := chunk["error"]):
            raise self._fail(f"error in stream: {str(error)[:300]}")
        if "usage" in chunk and (usage := chunk["usage"]) and type(usage) is dict:
            self.usage = Usage.from_openai(usage)
        if not self.model:
            self.model = str(chunk.get("model") or "")
        if not (choices := chunk.get("choices")):
            return
        if type(choices) is not list:
            raise self._fail(f"stream chunk's choices are not a list: {data[:120]!r}")
        choice = choices[0]
        if type(choice) is not dict:
            raise self._fail("chunk without a delta")
        delta = choice.get("delta")
        if type(delta) is not dict:
            if not choice.get("finish_reason"):
                raise self._fail("chunk without a delta")
            delta = {}
        if "reasoning_content" in delta or "reasoning" in delta:
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and type(reasoning) is str:
                self.reasoning.append(reasoning)
                out.append(ReasoningDelta(reasoning))
        if (text := delta.get("content")) and type(text) is str:
            self.text.append(text)
            out.append(TextDelta(text))
        if "tool_calls" in delta and (raw_calls := delta["tool_calls"]):
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
