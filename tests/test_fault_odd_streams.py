"""Odd but legal streams and bodies, at the wire, on every HTTP provider.

- An SSE event with empty ``data:`` (the WHATWG algorithm dispatches it) is skipped.
- An empty reply (no text, no tool calls, no reasoning: a 200 whose ``message`` is null, a stream
  that is only ``data: [DONE]``) is an :class:`EmptyReplyError`, retried like a 5xx within the
  retry policy (not when the finish reason says why it is empty); never a silent empty answer.
- A server that ignores ``"stream": true`` and answers with the JSON reply is read as a whole
  reply and yielded as the stream's events.
- A ``stream`` body parameter never decides how the call is made (``complete`` never streams).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import llm_chat, llm_function
from simplellmfunc.events import EventYield, ReactEndEvent
from simplellmfunc.exceptions import EmptyReplyError, StreamError
from simplellmfunc.providers import (
    AnthropicCompatible,
    FinishEvent,
    HTTPInterface,
    LLMRequest,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    UsageEvent,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import UserMessage

KEY = "sk-odd-test-0123456789"
REQUEST = LLMRequest((UserMessage("hi"),))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed
PROVIDERS: dict[str, type[HTTPInterface]] = {
    "chat": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}
MODES = ["complete", "stream"]


@pytest.fixture(params=sorted(PROVIDERS))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def llm(api: str, mock_server: MockLLMServer) -> AsyncIterator[HTTPInterface]:
    async with PROVIDERS[api](KEY, "mock-model", mock_server.url, retry_policy=FAST) as llm:
        yield llm


async def events_of(llm: HTTPInterface, request: LLMRequest = REQUEST) -> list[StreamEvent]:
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(request)) as events:
            return [event async for event in events]


async def text_of(llm: HTTPInterface, mode: str) -> str:
    if mode == "complete":
        with anyio.fail_after(GUARD):
            return (await llm.complete(REQUEST)).text
    final = (await events_of(llm))[-1]
    assert isinstance(final, FinishEvent)
    return final.response.text


# -- empty data: events ---------------------------------------------------------------------------


async def test_events_with_empty_data_are_skipped(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("abc", chunks=3, empty_events=True))
    received = await events_of(llm)
    assert [e.text for e in received if isinstance(e, TextDelta)] == ["a", "b", "c"]


async def test_an_error_event_without_data_is_still_an_error(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.error(200, body="event: error\ndata:\n\n"))
    with pytest.raises(StreamError, match="error"):
        await events_of(llm)


# -- empty replies --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_an_empty_reply_is_retried(
    mock_server: MockLLMServer, llm: HTTPInterface, mode: str
) -> None:
    mock_server.script(Reply.text(""), Reply.text("there it is"))
    assert await text_of(llm, mode) == "there it is"
    assert len(mock_server.requests) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_empty_replies_end_in_a_typed_retryable_error(
    mock_server: MockLLMServer, llm: HTTPInterface, mode: str
) -> None:
    mock_server.default = Reply.text("")
    with pytest.raises(EmptyReplyError, match="empty reply") as caught:
        await text_of(llm, mode)
    assert len(mock_server.requests) == 3  # the first attempt and FAST's two retries
    error = caught.value
    assert isinstance(error, StreamError)
    assert (error.status, error.retryable, error.attempts) == (200, True, 3)
    assert error.request_id == "req_mock_3"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("finish", "says"), [("length", "max_tokens"), ("content_filter", "content filter")]
)
async def test_an_empty_reply_that_says_why_is_not_retried(
    mock_server: MockLLMServer, llm: HTTPInterface, mode: str, finish: str, says: str
) -> None:
    mock_server.default = Reply.text("", finish_reason=finish)
    with pytest.raises(EmptyReplyError, match=says) as caught:
        await text_of(llm, mode)
    assert len(mock_server.requests) == 1
    assert not caught.value.retryable


@pytest.mark.parametrize(
    "body",
    [
        {"id": "c1", "choices": [{"index": 0, "message": None, "finish_reason": "stop"}]},
        {"id": "c1", "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]},
    ],
    ids=["message-null", "content-null"],
)
async def test_a_chat_completion_without_a_message(
    mock_server: MockLLMServer, body: dict[str, Any]
) -> None:
    mock_server.default = Reply.error(200, body=body)
    async with OpenAICompatible(KEY, "m", mock_server.url, retry_policy=FAST) as llm:
        with pytest.raises(EmptyReplyError, match="empty reply"):
            await llm.complete(REQUEST)


async def test_a_chat_stream_that_is_only_done(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.error(200, body="data: [DONE]\n\n")
    async with OpenAICompatible(KEY, "m", mock_server.url, retry_policy=FAST) as llm:
        with pytest.raises(EmptyReplyError, match="empty reply"):
            await events_of(llm)
    assert len(mock_server.requests) == 3


async def test_reasoning_alone_is_not_empty(mock_server: MockLLMServer, llm: HTTPInterface) -> None:
    mock_server.script(Reply.text("", reasoning="thought about it"))
    final = (await events_of(llm))[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.message.reasoning_details
    assert len(mock_server.requests) == 1


# -- a JSON reply to a streaming request ----------------------------------------------------------


async def test_a_json_reply_to_a_stream_request_is_streamed(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("whole answer", ignore_stream=True, usage=(7, 3)))
    received = await events_of(llm)
    assert [type(e) for e in received] == [TextDelta, UsageEvent, FinishEvent]
    assert isinstance(received[0], TextDelta)
    assert received[0].text == "whole answer"
    assert isinstance(received[1], UsageEvent)
    assert received[1].usage.prompt_tokens == 7
    final = received[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.text == "whole answer"
    assert mock_server.requests[0].json["stream"] is True


async def test_json_tool_calls_to_a_stream_request(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    calls = (ToolCallSpec("add", {"a": 1}, id="c1"), ToolCallSpec("mul", {"b": 2}, id="c2"))
    mock_server.script(Reply.tool_calls(*calls, ignore_stream=True))
    received = await events_of(llm)
    deltas = [e for e in received if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas] == [(0, "c1", "add"), (1, "c2", "mul")]
    final = received[-1]
    assert isinstance(final, FinishEvent)
    assert [c.arguments.replace(" ", "") for c in final.response.message.tool_calls] == [
        '{"a":1}',
        '{"b":2}',
    ]


async def test_a_json_error_to_a_stream_request(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    error = {"type": "invalid_request_error", "message": "quota gone"}
    mock_server.script(Reply.text("x", error_event=error, ignore_stream=True))
    with pytest.raises(StreamError, match="quota gone"):
        await events_of(llm)


async def test_an_empty_json_reply_to_a_stream_request_is_retried(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("", ignore_stream=True), Reply.text("ok", ignore_stream=True))
    final = (await events_of(llm))[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.text == "ok"


# -- the decorators -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["plain", "stream", "events"])
async def test_llm_chat_gets_the_retried_answer_or_a_typed_error(
    mock_server: MockLLMServer, llm: HTTPInterface, mode: str
) -> None:
    @llm_chat(llm, stream=mode == "stream", enable_event=mode == "events")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    async def run() -> list[Any]:
        with anyio.fail_after(GUARD):
            async with aclosing(agent("hi", history=[])) as items:
                return [item async for item in items]

    mock_server.script(Reply.text("", empty_events=True), Reply.text("hello", ignore_stream=True))
    items = await run()
    if mode == "events":
        ends = [i.event for i in items if isinstance(i, EventYield)]
        (end,) = [e for e in ends if isinstance(e, ReactEndEvent)]
        assert end.final_response == "hello"
    else:
        assert "".join(i[0] for i in items) == "hello"
    mock_server.default = Reply.text("")
    with pytest.raises(EmptyReplyError):
        await run()


async def test_llm_function_gets_the_retried_answer(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    @llm_function(llm)
    async def greet(name: str) -> str:
        """Greet."""

    mock_server.script(Reply.text(""), Reply.text("hi Ann"))
    with anyio.fail_after(GUARD):
        assert await greet("Ann") == "hi Ann"
    mock_server.default = Reply.text("")
    with pytest.raises(EmptyReplyError):
        await greet("Bob")


async def test_a_stream_body_parameter_never_makes_complete_stream(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    # The decorators refuse stream= as a body parameter; a request built by hand may carry it.
    request = LLMRequest((UserMessage("greet Ann"),), params={"stream": True})
    mock_server.script(Reply.text("hi Ann"))
    with anyio.fail_after(GUARD):
        assert (await llm.complete(request)).text == "hi Ann"
    assert "stream" not in mock_server.requests[0].json
