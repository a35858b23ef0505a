"""The LLM phase of an iteration: one provider call, streamed or not, abortable."""

from __future__ import annotations

import time
from collections.abc import Awaitable
from contextlib import aclosing
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from .._events import (
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMCallStartEvent,
    LLMChunkArriveEvent,
    ToolCallArgumentsDeltaEvent,
)
from .._messages import message_to_dict
from ..exceptions import ProviderError, StreamError
from ..providers import (
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
)
from ._emit import Emitter
from ._invocation import Invocation, RunContext
from ._protocol import StreamView
from ._steps import run_in_slot

__all__ = ["LLMOutcome", "RawItem", "TextChunk", "call_llm"]


@dataclass(frozen=True, slots=True)
class TextChunk:
    """A reply text delta, sent to plain (non-event) stream consumers."""

    text: str


@dataclass(frozen=True, slots=True)
class RawItem:
    """A provider stream event or response, sent to ``return_mode="raw"`` consumers."""

    item: object


@dataclass(frozen=True, slots=True)
class LLMOutcome:
    """The reply, or what arrived before an abort (``response`` is then ``None``).

    ``shown``: what a reader was shown of the reply, when the run's protocol filters what it
    shows (``None``: the reply's text went out as it came).
    """

    response: LLMResponse | None
    partial_text: str = ""
    shown: str | None = None


def _use_stream(invocation: Invocation, request: LLMRequest) -> bool:
    caps = invocation.llm.capabilities
    if not (invocation.stream and caps.streaming):
        return False
    return caps.streaming_with_tools or not request.tools


async def call_llm(run: RunContext, request: LLMRequest) -> LLMOutcome:
    """Run one LLM call of the run's current iteration and report it as events.

    Raises:
        ProviderError: When the provider fails (after an ``LLMCallErrorEvent``).
    """
    invocation, emitter, abort = run.invocation, run.emitter, run.abort
    iteration = run.state.iteration
    streaming = _use_stream(invocation, request)
    if emitter.wants_events:
        await emitter.event(
            LLMCallStartEvent(
                iteration,
                invocation.llm.model_name,
                tuple(message_to_dict(m) for m in request.messages),
                tuple(t.name for t in request.tools),
                streaming,
            )
        )
    started = time.perf_counter()
    partial: list[str] = []
    view = invocation.protocol.stream_view()
    reader = _Reader(partial, view)
    response: LLMResponse | None = None
    if abort is None:  # nothing can interrupt the call: no cancel scope needed
        response = await _in_slot(run, request, iteration, reader, streaming)
    else:
        with anyio.CancelScope() as scope:
            remove = abort.add_callback(lambda _reason: scope.cancel())
            try:
                response = await _in_slot(run, request, iteration, reader, streaming)
            finally:
                remove()
    if response is None:
        return LLMOutcome(None, "".join(partial))
    protocol = invocation.protocol
    reply_text = protocol.visible(response.text)  # the reader never sees protocol text
    shown: str | None = None
    if view is not None:
        shown = "".join(reader.shown)
        rest = protocol.rest_of_answer(reply_text, shown) if invocation.stream else ""
        if rest:
            shown += rest
            await report_answer(emitter, rest, shown)
    if emitter.wants_events:
        await emitter.event(
            LLMCallEndEvent(
                iteration,
                response.text,
                tuple(c.to_dict() for c in response.message.tool_calls),
                response.usage,
                response.finish_reason,
                time.perf_counter() - started,
                response.provider,
                response.model or invocation.llm.model_name,
                reply_text,
            )
        )
    return LLMOutcome(response, shown=shown)


@dataclass(slots=True)
class _Reader:
    """What one call collects as it arrives: the reply text (``partial``, kept for an abort)
    and, when the protocol filters what is shown (``view``), the pieces shown."""

    partial: list[str]
    view: StreamView | None
    shown: list[str] = field(default_factory=list)


def _in_slot(
    run: RunContext, request: LLMRequest, iteration: int, reader: _Reader, streaming: bool
) -> Awaitable[LLMResponse]:
    """The provider call, as a durable step when the run has a step runner.

    Without one (the common case) it is the bare :func:`_request` coroutine: no closure and
    no ``run_in_slot`` frame on every resumption of the call.
    """
    invocation, emitter = run.invocation, run.emitter
    if run.steps is None:
        return _request(invocation, request, iteration, emitter, reader, streaming)
    slot = run.steps.slot("llm", invocation.llm.model_name)

    async def request_once() -> LLMResponse:
        return await _request(invocation, request, iteration, emitter, reader, streaming)

    return run_in_slot(slot, emitter, "llm", invocation.llm.model_name, request_once)


async def _request(
    invocation: Invocation,
    request: LLMRequest,
    iteration: int,
    emitter: Emitter,
    reader: _Reader,
    streaming: bool,
) -> LLMResponse:
    """The provider call itself; a failure is reported as an event and re-raised.

    Raises:
        ProviderError: When the provider fails.
    """
    try:
        if streaming:
            return await _stream(invocation, request, emitter, reader)
        response = await invocation.llm.complete(request)
        if emitter.wants_raw:
            await emitter.raw(RawItem(response))
        elif invocation.stream and response.text:
            text = response.text
            if reader.view is not None:
                text = reader.view.feed(text)
                reader.shown.append(text)
            if text:
                await _chunk(emitter, text)
        return response
    except ProviderError as exc:
        await emitter.event(
            LLMCallErrorEvent(iteration, type(exc).__name__, str(exc), exc.status, exc.retryable)
        )
        raise


async def _chunk(emitter: Emitter, text: str) -> None:
    """Report the shown text of a reply that came in one piece: as an event, or a text item."""
    if emitter.wants_events:
        await emitter.event(LLMChunkArriveEvent(text=text, accumulated_text=text))
    elif emitter.wants_text:
        await emitter.raw(TextChunk(text))


async def report_answer(emitter: Emitter, text: str, accumulated: str) -> None:
    """Answer text known only once the reply was read (the protocol did not show it while it
    arrived), reported as one more text piece."""
    if emitter.wants_events:
        await emitter.event(LLMChunkArriveEvent(text=text, accumulated_text=accumulated))
    elif emitter.wants_text:
        await emitter.raw(TextChunk(text))


async def _stream(
    invocation: Invocation, request: LLMRequest, emitter: Emitter, reader: _Reader
) -> LLMResponse:
    """The streamed call: every delta passes through this loop, so what does not change during
    a call (what the consumer asked for, the protocol's view of the text) is read once."""
    calls: dict[int, tuple[str, str]] = {}
    accumulated = ""
    index = 0
    raw, events = emitter.wants_raw, emitter.wants_events
    # Text deltas as items (plain stream mode), unless the consumer takes raw ones; a protocol
    # with a view (the JSON protocol) shows only what the view passes on.
    partial, view, shown = reader.partial, reader.view, reader.shown
    texts = emitter.wants_text and not raw and not events
    first = texts or events
    async with aclosing(invocation.llm.stream(request)) as stream:
        async for event in stream:
            if raw:
                await emitter.raw(RawItem(event))
            if isinstance(event, TextDelta):
                partial.append(event.text)
                text = event.text
                if view is not None:
                    text = view.feed(text)
                    if not text:
                        index += events
                        continue
                    shown.append(text)
                if texts:
                    await emitter.raw(TextChunk(text))
                elif events:
                    accumulated += text
                    await emitter.event(
                        LLMChunkArriveEvent(
                            text=text, accumulated_text=accumulated, chunk_index=index
                        )
                    )
                    index += 1
                if first:
                    # Time to first token: when more of the reply is already buffered (one
                    # network read, or HTTP chunks parsed from one buffer), the consumer gets
                    # the first text now, not after the whole batch. Once per call.
                    first = False
                    await anyio.lowlevel.checkpoint()
            elif isinstance(event, ReasoningDelta):
                if events:
                    await emitter.event(
                        LLMChunkArriveEvent(reasoning=event.text, chunk_index=index)
                    )
                    index += 1
            elif isinstance(event, ToolCallDelta):
                await _tool_delta(emitter, calls, event)
            elif isinstance(event, FinishEvent):
                return event.response
    raise StreamError(
        f"{invocation.llm.provider_name}: stream ended without a final response",
        provider=invocation.llm.provider_name,
    )


async def _tool_delta(
    emitter: Emitter, calls: dict[int, tuple[str, str]], delta: ToolCallDelta
) -> None:
    known_id, known_name = calls.get(delta.index, ("", ""))
    call_id, name = delta.id or known_id, delta.name or known_name
    calls[delta.index] = (call_id, name)
    if emitter.wants_events and delta.arguments:
        await emitter.event(ToolCallArgumentsDeltaEvent(call_id, name, delta.arguments))
