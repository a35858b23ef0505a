"""ScriptedLLM: an in-process model with canned replies, for unit tests of user code.

No server, no sockets: each call takes the next scripted reply. Use it to test an
``@llm_function`` or an ``@llm_chat`` agent (tools, events, histories) without a network; use
:class:`~simplellmfunc.testing.MockLLMServer` to test at the wire (HTTP, SSE, faults).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import replace
from typing import TypeAlias

import anyio

from .._content import Text
from .._messages import AssistantMessage, Message, ToolCall
from .._usage import Usage
from ..exceptions import UserError
from ..providers import (
    Capabilities,
    FinishEvent,
    LLMInterface,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from ._render_openai import split_text
from ._script import ToolCallSpec

__all__ = ["Canned", "ScriptedLLM"]

_IMAGE_CHARS = 340  # about 85 tokens, what a low-detail image costs

Answer: TypeAlias = str | LLMResponse
Canned: TypeAlias = Answer | BaseException | Callable[[LLMRequest], Answer]
"""One scripted reply: text, a full response, an exception to raise, or a callable of the
request returning text or a response (it may raise, too)."""


class ScriptedLLM(LLMInterface):
    """A model that answers each call with the next canned reply, and records the requests.

    Example:
        >>> llm = ScriptedLLM([
        ...     ScriptedLLM.response(tool_calls=[ToolCallSpec("add", {"a": 1, "b": 2})]),
        ...     "The sum is 3.",
        ... ])
        >>> # decorate with @llm_chat(llm, toolkit=[add]) and run; then inspect llm.requests

    Streaming splits the text into ``chunks`` text deltas, then streams each tool call (id and
    name first, then its arguments in pieces), then usage, then the :class:`FinishEvent`.

    Args:
        replies: Canned replies, consumed one per call (see :data:`Canned`).
        default: The reply used once the script is exhausted (``None``: raise ``UserError``).
        model_name: Reported model name.
        capabilities: What this fake model claims to support (default: everything).
        chunks: How many pieces streamed text and arguments are cut into.
        delay: Seconds to wait before each reply (to test aborts and timeouts).
        chunk_delay: Seconds to wait between streamed events.
    """

    def __init__(
        self,
        replies: Iterable[Canned] = (),
        *,
        default: Canned | None = None,
        model_name: str = "scripted",
        capabilities: Capabilities | None = None,
        chunks: int = 3,
        delay: float = 0.0,
        chunk_delay: float = 0.0,
    ) -> None:
        if chunks < 1:
            raise UserError(f"ScriptedLLM chunks must be >= 1, got {chunks}")
        self.model_name = model_name
        self.provider_name = "scripted"
        self.capabilities = capabilities or Capabilities()
        self.default = default
        self.chunks = chunks
        self.delay = delay
        self.chunk_delay = chunk_delay
        self.requests: list[LLMRequest] = []
        self._queue: deque[Canned] = deque()
        self.script(*replies)

    @staticmethod
    def response(
        text: str | None = None,
        *,
        tool_calls: Sequence[ToolCallSpec | ToolCall] = (),
        reasoning: str = "",
        usage: Usage | tuple[int, int] | None = None,
        finish_reason: str | None = None,
    ) -> LLMResponse:
        """Build a canned response with text and/or tool calls.

        Calls given as :class:`ToolCallSpec` without an id get a unique ``call_<hex>`` id.
        """
        calls = tuple(_tool_call(c) for c in tool_calls)
        details = ({"type": "reasoning.text", "text": reasoning},) if reasoning else ()
        if isinstance(usage, tuple):
            usage = Usage(usage[0], usage[1], usage[0] + usage[1], calls=1)
        return LLMResponse(
            message=AssistantMessage(text, calls, details),
            finish_reason=finish_reason or ("tool_calls" if calls else "stop"),
            usage=usage or Usage(),
            provider="scripted",
        )

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        return len(self._queue)

    def script(self, *replies: Canned) -> None:
        """Queue more replies after those already queued.

        Raises:
            UserError: For an item that is not a canned reply.
        """
        for item in replies:
            if not isinstance(item, str | LLMResponse | BaseException) and not callable(item):
                raise UserError(f"not a canned reply: {item!r}")
        self._queue.extend(replies)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        """Answer with the next canned reply.

        Raises:
            UserError: When the script is exhausted and there is no default.
            BaseException: A scripted exception, or whatever a scripted callable raised.
        """
        response = self._next(request)
        if self.delay:
            await anyio.sleep(self.delay)
        return response

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        """Stream the next canned reply: text deltas, tool-call deltas, usage, finish.

        Raises:
            UserError: When the script is exhausted and there is no default.
            BaseException: A scripted exception, or whatever a scripted callable raised.
        """
        response = self._next(request)
        if self.delay:
            await anyio.sleep(self.delay)
        for event in self._events(response):
            if self.chunk_delay:
                await anyio.sleep(self.chunk_delay)
            yield event

    def _events(self, response: LLMResponse) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for detail in response.message.reasoning_details:
            text = detail.get("text")
            if isinstance(text, str):
                events.extend(ReasoningDelta(p) for p in split_text(text, self.chunks))
        events.extend(TextDelta(p) for p in split_text(response.text, self.chunks))
        for index, call in enumerate(response.message.tool_calls):
            events.append(ToolCallDelta(index, call.id, call.name, ""))
            for piece in split_text(call.arguments, self.chunks):
                events.append(ToolCallDelta(index, None, None, piece))
        events.append(UsageEvent(response.usage))
        events.append(FinishEvent(response))
        return events

    def _next(self, request: LLMRequest) -> LLMResponse:
        self.requests.append(request)
        item = self._queue.popleft() if self._queue else self.default
        if item is None:
            raise UserError(f"ScriptedLLM: no scripted reply left for call #{len(self.requests)}")
        if isinstance(item, BaseException):
            raise item
        answer = item if isinstance(item, str | LLMResponse) else item(request)
        if isinstance(answer, str):
            answer = self.response(answer)
        if not isinstance(answer, LLMResponse):
            raise UserError(f"a scripted callable must return str or LLMResponse: {answer!r}")
        return self._finish(request, answer)

    def _finish(self, request: LLMRequest, response: LLMResponse) -> LLMResponse:
        """Fill in the model name and, for a response without usage, a cheap estimate."""
        if response.usage.calls:
            return replace(response, model=response.model or self.model_name)
        prompt = sum(_chars(m) for m in request.messages) // 4
        completion = _chars(response.message) // 4
        usage = Usage(prompt, completion, prompt + completion, calls=1, estimated=True)
        return replace(response, usage=usage, model=response.model or self.model_name)

    def __repr__(self) -> str:
        return f"ScriptedLLM(model={self.model_name!r}, pending={self.pending})"


def _tool_call(call: ToolCallSpec | ToolCall) -> ToolCall:
    if isinstance(call, ToolCall):
        return call
    call_id = call.id if call.id is not None else f"call_{uuid.uuid4().hex[:12]}"
    return ToolCall(call_id, call.name, call.arguments_json())


def _chars(message: Message) -> int:
    """Characters of a message for the usage estimate (an image counts as 340)."""
    content = message.content or ""
    if isinstance(content, str):
        size = len(content)
    else:
        size = sum(len(p.text) if isinstance(p, Text) else _IMAGE_CHARS for p in content)
    if isinstance(message, AssistantMessage):
        size += sum(len(c.name) + len(c.arguments) for c in message.tool_calls)
    return size
