"""AnthropicCompatible at the wire: request bodies and headers, every SSE event type, errors after
a 200, retries (529), truncated tool input, multimodal content, turn merging, token counting, and
the decorators through this provider, all against the mock server's ``/v1/messages``."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any, Literal

import anyio
import psutil
import pytest
from PIL import Image
from pydantic import BaseModel

from simplellmfunc import AbortSignal, ImgPath, ImgUrl, llm_chat, llm_function, tool
from simplellmfunc._content import Text
from simplellmfunc._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from simplellmfunc.exceptions import (
    AuthenticationError,
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from simplellmfunc.hooks import (
    EventYield,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ResponseYield,
    ToolCallEndEvent,
)
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    UsageEvent,
)
from simplellmfunc.providers._anthropic import AnthropicCompatible
from simplellmfunc.providers._assembly import parse_arguments
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

KEY = "sk-ant-test-0123456789abcdef"
REQUEST = LLMRequest((SystemMessage("Be brief."), UserMessage("hi")))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
WEATHER = ToolSpec(
    "weather", "The weather in a city.", {"type": "object", "properties": {"city": {}}}
)

Api = Literal["complete", "stream"]


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[AnthropicCompatible]:
    async with AnthropicCompatible(KEY, "claude-test", mock_server.url, retry_policy=FAST) as llm:
        yield llm


async def collect(llm: AnthropicCompatible, request: LLMRequest = REQUEST) -> list[StreamEvent]:
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(request)) as events:
            return [event async for event in events]


async def call(llm: AnthropicCompatible, api: Api, request: LLMRequest = REQUEST) -> LLMResponse:
    if api == "complete":
        with anyio.fail_after(GUARD):
            return await llm.complete(request)
    events = await collect(llm, request)
    assert isinstance(events[-1], FinishEvent)
    assert not any(isinstance(e, FinishEvent) for e in events[:-1])
    return events[-1].response


async def drain(llm: AnthropicCompatible, request: LLMRequest, received: list[StreamEvent]) -> None:
    """Consume a stream into ``received`` (what arrived before an error stays there)."""
    with anyio.fail_after(GUARD):
        async with aclosing(llm.stream(request)) as events:
            async for event in events:
                received.append(event)


def sse(*events: tuple[str | None, dict[str, Any] | str]) -> str:
    """A hand-written event stream (for shapes the scripted replies do not produce)."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out)


def ev(kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **fields}


START = ev("message_start", message={"id": "msg_1", "model": "raw", "usage": {"input_tokens": 7}})
TEXT_BLOCK = ev("content_block_start", index=0, content_block={"type": "text", "text": ""})
STOP = ev("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 3})
END = ev("message_stop")


def text_delta(text: str, index: int = 0) -> tuple[str, dict[str, Any]]:
    return ev("content_block_delta", index=index, delta={"type": "text_delta", "text": text})


# -- the basics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_text_reply_headers_and_body(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(Reply.text("Hello there", chunks=3))
    response = await call(llm, api)
    assert (response.text, response.finish_reason) == ("Hello there", "stop")
    assert (response.model, response.provider) == ("claude-test", "anthropic")
    assert response.request_id == "req_mock_1"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (10, 5)
    assert not response.usage.estimated
    (recorded,) = mock_server.requests
    assert recorded.path == "/v1/messages"
    assert recorded.headers["x-api-key"] == "sk-...cdef"
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in recorded.headers
    expected = {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "hi"}],
    }
    assert recorded.json == (expected if api == "complete" else {**expected, "stream": True})


async def test_stream_event_order(mock_server: MockLLMServer, llm: AnthropicCompatible) -> None:
    mock_server.script(Reply.text("abcdef", chunks=3, reasoning="hmm", usage=(12, 4)))
    events = await collect(llm)
    kinds = [e.kind for e in events]
    assert kinds == [
        "reasoning",
        "reasoning",
        "reasoning",
        "text",
        "text",
        "text",
        "usage",
        "finish",
    ]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd", "ef"]
    usage = events[-2]
    assert isinstance(usage, UsageEvent)
    assert usage.usage.completion_tokens == 4


async def test_max_tokens_and_parameters(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok")
    async with AnthropicCompatible(
        None, "claude-test", mock_server.url, max_tokens=100, temperature=0.2
    ) as llm:
        await llm.complete(REQUEST)
        await llm.complete(
            LLMRequest(REQUEST.messages, params={"max_tokens": 7, "stop": "END", "top_k": 3})
        )
    first, second = (r.json for r in mock_server.requests)
    assert (first["max_tokens"], first["temperature"]) == (100, 0.2)
    assert (second["max_tokens"], second["stop_sequences"], second["top_k"]) == (7, ["END"], 3)
    assert "stop" not in second
    assert "x-api-key" not in mock_server.requests[0].headers  # no key: no auth header


async def test_headers_version_and_beta(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("ok"))
    async with AnthropicCompatible(
        KEY,
        "claude-test",
        mock_server.url,
        anthropic_version="2099-01-01",
        headers={"anthropic-beta": "tools-2099"},
    ) as llm:
        await llm.complete(REQUEST)
    headers = mock_server.requests[0].headers
    assert (headers["anthropic-version"], headers["anthropic-beta"]) == ("2099-01-01", "tools-2099")


@pytest.mark.parametrize(
    "options",
    [
        {"split_utf8": True, "chunks": 5},
        {"line_ending": "crlf", "keepalive": True},
        {"line_ending": "cr", "chunks": 2},
    ],
)
async def test_sse_oddities_give_the_same_reply(
    mock_server: MockLLMServer, llm: AnthropicCompatible, options: Any
) -> None:
    mock_server.script(Reply.text("héllo wörld — 你好 🌍", **options))
    assert (await call(llm, "stream")).text == "héllo wörld — 你好 🌍"


async def test_keep_alive_reuses_one_connection(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.default = Reply.text("again", chunks=2)
    for _ in range(3):
        assert (await call(llm, "stream")).text == "again"
    sockets = [
        c
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == mock_server.port and c.status == psutil.CONN_ESTABLISHED
    ]
    assert len(sockets) == 1  # each stream was read to its end, so the connection was reused


# -- every SSE event type ------------------------------------------------------------------------


async def test_every_event_type_in_a_hand_written_stream(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    usage = {"input_tokens": 5, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 2}
    thinking = {"type": "thinking", "thinking": "", "signature": ""}
    body = sse(
        ev("message_start", message={"id": "msg_x", "model": "claude-raw", "usage": usage}),
        ev("content_block_start", index=0, content_block=thinking),
        ("ping", {"type": "ping"}),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Let"}),
        ev("content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": " me"}),
        ev("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "EqQ"}),
        ev("content_block_stop", index=0),
        ev(
            "content_block_start",
            index=1,
            content_block={"type": "redacted_thinking", "data": "xx"},
        ),
        ev("content_block_stop", index=1),
        ev("content_block_start", index=2, content_block={"type": "text", "text": "Hi"}),
        text_delta(" there", 2),
        ev("content_block_delta", index=2, delta={"type": "citations_delta", "citation": {}}),
        ev("content_block_stop", index=2),
        ev("some_future_event", anything=True),
        ev(
            "content_block_start",
            index=3,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
        ),
        ev("content_block_delta", index=3, delta={"type": "input_json_delta", "partial_json": ""}),
        ev(
            "content_block_delta",
            index=3,
            delta={"type": "input_json_delta", "partial_json": '{"city": '},
        ),
        ev(
            "content_block_delta",
            index=3,
            delta={"type": "input_json_delta", "partial_json": '"Oslo"}'},
        ),
        ev("content_block_stop", index=3),
        ("ping", {"type": "ping"}),
        ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
        END,
    )
    mock_server.script(Reply.error(200, body=body))
    events = await collect(llm)
    assert [e.text for e in events if isinstance(e, ReasoningDelta)] == ["Let", " me"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi", " there"]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name, d.arguments) for d in deltas] == [
        (0, "toolu_1", "weather", ""),
        (0, "toolu_1", None, '{"city": '),
        (0, "toolu_1", None, '"Oslo"}'),
    ]
    final = events[-1]
    assert isinstance(final, FinishEvent)
    response = final.response
    assert response.text == "Hi there"
    assert response.message.tool_calls == (ToolCall("toolu_1", "weather", '{"city": "Oslo"}'),)
    assert [dict(r) for r in response.message.reasoning_details] == [
        {"type": "thinking", "thinking": "Let me", "signature": "EqQ"},
        {"type": "redacted_thinking", "data": "xx"},
    ]
    assert (response.finish_reason, response.model) == ("tool_calls", "claude-raw")
    usage = response.usage
    assert (usage.prompt_tokens, usage.cached_tokens) == (27, 20)
    assert (usage.completion_tokens, usage.total_tokens) == (9, 36)


async def test_events_without_event_lines_are_read_by_their_type(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    events = [START, TEXT_BLOCK, text_delta("plain"), STOP, END]
    mock_server.script(Reply.error(200, body=sse(*((None, data) for _, data in events))))
    assert (await call(llm, "stream")).text == "plain"


async def test_message_delta_without_message_stop_is_complete(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.error(200, body=sse(START, TEXT_BLOCK, text_delta("done"), STOP)))
    assert (await call(llm, "stream")).text == "done"


async def test_stream_cut_before_the_end_is_an_error(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.error(200, body=sse(START, TEXT_BLOCK, text_delta("cut"))))
    with pytest.raises(StreamError, match="before the reply was complete"):
        await collect(llm)


@pytest.mark.parametrize("data", ["[1, 2]", '"text"', "{not json"])
async def test_event_that_is_not_an_object_is_an_error(
    mock_server: MockLLMServer, llm: AnthropicCompatible, data: str
) -> None:
    mock_server.script(Reply.error(200, body=sse(START, ("content_block_delta", data), END)))
    with pytest.raises(StreamError, match="stream event"):
        await collect(llm)


async def test_delta_for_an_unknown_tool_block_is_an_error(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    bad = ev(
        "content_block_delta", index=4, delta={"type": "input_json_delta", "partial_json": "{"}
    )
    mock_server.script(Reply.error(200, body=sse(START, bad, STOP, END)))
    with pytest.raises(StreamError, match="unknown block 4"):
        await collect(llm)


async def test_tool_input_sent_whole_in_the_block_start(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    block = {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Bergen"}}
    body = sse(START, ev("content_block_start", index=0, content_block=block), STOP, END)
    mock_server.script(Reply.error(200, body=body))
    (call_,) = (await call(llm, "stream")).message.tool_calls
    assert json.loads(call_.arguments) == {"city": "Bergen"}


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["event", "data"])
async def test_error_event_after_200_is_a_stream_error(
    mock_server: MockLLMServer, llm: AnthropicCompatible, style: Any
) -> None:
    error = {"type": "overloaded_error", "message": "Overloaded"}
    mock_server.script(
        Reply.text("partial answer", chunks=4, error_event=error, error_event_style=style)
    )
    received: list[StreamEvent] = []
    with pytest.raises(StreamError, match="overloaded_error: Overloaded") as info:
        await drain(llm, REQUEST, received)
    assert "".join(e.text for e in received if isinstance(e, TextDelta)) == "partial answer"
    assert (info.value.status, info.value.retryable) == (200, True)
    assert len(mock_server.requests) == 1  # never retried once the stream started


async def test_error_event_at_a_disconnect_point(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    error = {"type": "invalid_request_error", "message": "nope"}
    mock_server.script(Reply.text("abc", chunks=3, disconnect_after=3, error_event=error))
    with pytest.raises(StreamError, match="invalid_request_error") as info:
        await collect(llm)
    assert not info.value.retryable


async def test_error_object_in_a_200_message(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("x", error_event={"type": "api_error", "message": "boom"}))
    with pytest.raises(StreamError, match="api_error: boom"):
        await llm.complete(REQUEST)


async def test_malformed_event_and_disconnect(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("abcdef", chunks=6, malformed=True))
    with pytest.raises(StreamError, match="malformed stream event"):
        await collect(llm)
    mock_server.script(Reply.text("abcdef", chunks=6, disconnect_after=4))
    with pytest.raises(StreamError) as info:
        await collect(llm)
    assert info.value.retryable
    mock_server.script(Reply.text("abcdef", malformed=True))
    with pytest.raises(ProviderError, match="not valid JSON"):
        await llm.complete(REQUEST)


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_529_overloaded_is_retried_with_retry_after(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.error(529, "Overloaded", headers={"retry-after": "0"}),
        Reply.error(500, "Internal"),
        Reply.text("finally"),
    )
    assert (await call(llm, api)).text == "finally"
    assert len(mock_server.requests) == 3


async def test_529_after_the_retries_names_the_error(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.default = Reply.error(529, "Overloaded")
    with pytest.raises(ProviderError, match="HTTP 529: Overloaded") as info:
        await llm.complete(REQUEST)
    assert (info.value.status, info.value.attempts, info.value.retryable) == (529, 3, True)
    assert "overloaded_error" in info.value.body_excerpt


async def test_client_errors_are_not_retried(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.error(401, "invalid x-api-key"))
    with pytest.raises(AuthenticationError):
        await llm.complete(REQUEST)
    assert len(mock_server.requests) == 1


async def test_a_request_the_api_refuses_is_a_400(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    # The mock checks requests as the API does: a body without max_tokens is refused.
    mock_server.script(Reply.text("unused"))
    with pytest.raises(ProviderError, match="max_tokens: Field required") as info:
        await llm.complete(LLMRequest(REQUEST.messages, params={"max_tokens": None}))
    assert (info.value.status, len(mock_server.requests)) == (400, 1)


async def test_the_mock_refuses_tool_blocks_the_api_refuses(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.default = Reply.text("unused")
    orphan = (UserMessage("hi"), ToolMessage("nope", "result"))
    with pytest.raises(ProviderError, match="unexpected `tool_use_id`"):
        await llm.complete(LLMRequest(orphan))
    unanswered = (
        UserMessage("hi"),
        AssistantMessage(None, (ToolCall("t1", "f"),)),
        UserMessage("?"),
    )
    with pytest.raises(ProviderError, match="without `tool_result` blocks"):
        await llm.complete(LLMRequest(unanswered))


async def test_slow_drip_ends_at_the_deadline(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("x", drip=0.01))
    received: list[StreamEvent] = []
    with pytest.raises(ProviderTimeoutError):
        await drain(llm, LLMRequest(REQUEST.messages, timeout=0.3), received)
    assert received
    assert all(isinstance(e, TextDelta) for e in received)


# -- tools -------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_tool_use_blocks_become_tool_calls(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="toolu_a"),
            ToolCallSpec("weather", {"city": "Zürich"}),
            text="Checking.",
            chunks=3,
        )
    )
    request = LLMRequest(REQUEST.messages, tools=(WEATHER,), tool_choice="required")
    response = await call(llm, api, request)
    assert response.text == "Checking."
    assert response.finish_reason == "tool_calls"
    assert response.message.tool_calls == (
        ToolCall("toolu_a", "weather", '{"city": "Oslo"}'),
        ToolCall("toolu_mock1_1", "weather", '{"city": "Zürich"}'),
    )
    body = mock_server.requests[0].json
    assert body["tools"] == [
        {
            "name": "weather",
            "description": "The weather in a city.",
            "input_schema": WEATHER.parameters,
        }
    ]
    assert body["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(
    ("choice", "caps", "expected"),
    [
        ("auto", Capabilities(), {"type": "auto"}),
        ("none", Capabilities(), {"type": "none"}),
        (None, Capabilities(), None),
        (
            None,
            Capabilities(parallel_tool_calls=False),
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
        (
            {"type": "function", "function": {"name": "weather"}},
            Capabilities(),
            {"type": "tool", "name": "weather"},
        ),
        ({"type": "tool", "name": "weather"}, Capabilities(), {"type": "tool", "name": "weather"}),
    ],
)
async def test_tool_choice_mapping(
    mock_server: MockLLMServer, choice: Any, caps: Capabilities, expected: Any
) -> None:
    mock_server.script(Reply.text("ok"))
    async with AnthropicCompatible(KEY, "claude-test", mock_server.url, capabilities=caps) as llm:
        await llm.complete(LLMRequest(REQUEST.messages, tools=(WEATHER,), tool_choice=choice))
    assert mock_server.requests[0].json.get("tool_choice") == expected


async def test_tools_left_out_without_native_tools(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("ok"))
    caps = Capabilities(native_tools=False)
    async with AnthropicCompatible(KEY, "claude-test", mock_server.url, capabilities=caps) as llm:
        await llm.complete(LLMRequest(REQUEST.messages, tools=(WEATHER,), tool_choice="auto"))
    assert not {"tools", "tool_choice"} & mock_server.requests[0].json.keys()


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_max_tokens_during_a_tool_call_reports_truncated_arguments(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="t1"),
            ToolCallSpec("weather", '{"city": "Ber', id="t2"),
            chunks=3,
            finish_reason="length",
        )
    )
    response = await call(llm, api, LLMRequest(REQUEST.messages, tools=(WEATHER,)))
    assert response.finish_reason == "length"
    first, second = response.message.tool_calls
    assert parse_arguments(first.arguments) == ({"city": "Oslo"}, None)  # finished before the cut
    arguments, problem = parse_arguments(second.arguments)
    assert arguments is None
    assert "look truncated" in (problem or "")


async def test_max_tokens_with_complete_looking_input_is_still_truncated(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    # A non-streamed reply carries a parsed ``input``: what was cut is unknowable, so the call
    # must not look runnable.
    mock_server.script(Reply.tool_calls(ToolCallSpec("weather", {}), finish_reason="length"))
    response = await llm.complete(LLMRequest(REQUEST.messages, tools=(WEATHER,)))
    (cut,) = response.message.tool_calls
    assert "look truncated" in (parse_arguments(cut.arguments)[1] or "")


# -- history conversion ------------------------------------------------------------------------


async def test_history_becomes_alternating_turns_with_grouped_tool_results(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    thinking = {"type": "thinking", "thinking": "plan", "signature": "sig"}
    history = (
        SystemMessage("Sys."),
        UserMessage("first"),
        UserMessage("second"),
        AssistantMessage(
            "Checking.",
            (ToolCall("c1", "weather", '{"city": "Oslo"}'), ToolCall("c2", "weather", "{broken")),
            ({"type": "reasoning.text", "text": "not Anthropic's"}, thinking),
        ),
        ToolMessage("c1", "sunny"),
        ToolMessage("c2", (Text("rain"),)),
        UserMessage("thanks"),
        AssistantMessage("", extra={"truncated": True}),  # an aborted, empty reply
        AssistantMessage("You're welcome."),
        AssistantMessage("Anything else?"),
        UserMessage("no"),
    )
    mock_server.script(Reply.text("ok"))
    await llm.complete(LLMRequest(history, tools=(WEATHER,)))
    body = mock_server.requests[0].json  # the mock refuses what the API would refuse
    assert body["system"] == "Sys."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        {
            "role": "assistant",
            "content": [
                thinking,
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "c2", "name": "weather", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": [{"type": "text", "text": "rain"}],
                },
                {"type": "text", "text": "thanks"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "You're welcome."},
                {"type": "text", "text": "Anything else?"},
            ],
        },
        {"role": "user", "content": "no"},
    ]


async def test_multimodal_user_and_tool_content(
    mock_server: MockLLMServer, llm: AnthropicCompatible, tmp_path: Path
) -> None:
    png = tmp_path / "dot.png"
    Image.new("RGB", (2, 2), "red").save(png)
    png_b64 = base64.b64encode(png.read_bytes()).decode()
    plain = "data:image/gif,GIF89a"  # a data URL that is not base64
    user = UserMessage(
        (
            Text("What is this?"),
            ImgUrl(f"data:image/png;base64,{png_b64}", "low"),
            ImgUrl("https://example.com/cat.jpg"),
            ImgPath(png),
            ImgUrl(plain),
        )
    )
    assistant = AssistantMessage(None, (ToolCall("s1", "screenshot", "{}"),))
    result = ToolMessage("s1", (Text("here"), ImgUrl("https://example.com/shot.png")))
    mock_server.script(Reply.text("A red dot."))
    await llm.complete(LLMRequest((user, assistant, result)))
    first, _, third = mock_server.requests[0].json["messages"]
    source = {"type": "base64", "media_type": "image/png", "data": png_b64}
    png_block = {"type": "image", "source": source}
    assert first["content"] == [
        {"type": "text", "text": "What is this?"},
        png_block,
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
        png_block,
        {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/gif",
                "data": base64.b64encode(b"GIF89a").decode(),
            },
        },
    ]
    assert third["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "s1",
            "content": [
                {"type": "text", "text": "here"},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/shot.png"}},
            ],
        }
    ]


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_thinking_is_kept_and_sent_back(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("weather", {"city": "Oslo"}, id="t1"), reasoning="Think.")
    )
    first = await call(llm, api, LLMRequest(REQUEST.messages, tools=(WEATHER,)))
    details = [dict(d) for d in first.message.reasoning_details]
    assert details == [{"type": "thinking", "thinking": "Think.", "signature": "sig_mock1"}]
    mock_server.script(Reply.text("Sunny."))
    history = (*REQUEST.messages, first.message, ToolMessage("t1", "sunny"))
    await call(llm, api, LLMRequest(history, tools=(WEATHER,)))
    sent = mock_server.requests[1].json["messages"][1]["content"]
    assert sent[0] == details[0]


# -- usage and token counting ------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_missing_usage_is_estimated(
    mock_server: MockLLMServer, llm: AnthropicCompatible, api: Api
) -> None:
    mock_server.script(Reply.text("Hello there", usage=None))
    usage = (await call(llm, api)).usage
    assert (usage.estimated, usage.calls) == (True, 1)
    assert min(usage.prompt_tokens, usage.completion_tokens) > 0


async def test_count_tokens_uses_the_endpoint_without_consuming_a_reply(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("kept for later"))
    count = await llm.count_tokens(REQUEST.messages)
    (recorded,) = mock_server.requests
    assert recorded.path == "/v1/messages/count_tokens"
    assert recorded.json == {
        "model": "claude-test",
        "messages": [{"role": "user", "content": "hi"}],
        "system": "Be brief.",
    }
    counted = {"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}
    assert count == -(-len(json.dumps(counted, separators=(",", ":"))) // 4)
    assert mock_server.pending == 1


async def test_count_tokens_falls_back_once_the_endpoint_is_missing(
    mock_server: MockLLMServer,
) -> None:
    # A base URL under which the server has no route at all: count_tokens answers 404.
    async with AnthropicCompatible(KEY, "claude-test", mock_server.url + "/nowhere") as llm:
        first = await llm.count_tokens(REQUEST.messages)
        second = await llm.count_tokens(REQUEST.messages)
    assert first == second > 0
    assert len(mock_server.requests) == 1  # remembered: asked once


async def test_count_tokens_of_a_system_prompt_alone_is_local(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    assert await llm.count_tokens((SystemMessage("only a system prompt"),)) > 0
    assert not mock_server.requests


# -- lifetime and configuration ----------------------------------------------------------------


async def test_breaking_out_of_a_stream_releases_the_connection(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("x" * 50, chunks=50, chunk_delay=0.01), Reply.text("next"))
    async with aclosing(llm.stream(REQUEST)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                break
    assert (await call(llm, "complete")).text == "next"


async def test_repr_and_provider_json(tmp_path: Path) -> None:
    path = tmp_path / "provider.json"
    entry = {
        "model_name": "claude-x",
        "api_keys": [KEY],
        "base_url": "http://h/v1",
        "max_tokens": 64,
    }
    path.write_text(json.dumps({"anthropic": [entry]}))
    loaded = AnthropicCompatible.load_from_json_file(path)
    async with loaded["anthropic"]["claude-x"] as llm:
        assert isinstance(llm, AnthropicCompatible)
        assert (llm.max_tokens, llm.base_url, llm.provider_name) == (64, "http://h/v1", "anthropic")
        assert KEY not in repr(llm)
        assert "cdef" in repr(llm)
        assert not llm.capabilities.json_schema


# -- the decorators through this provider ------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def consume(stream: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(stream) as items:
            return [item async for item in items]


async def test_typed_llm_function_uses_a_prompt_contract(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text('```json\n{"name": "Oslo", "population": 709000}\n```'))

    @llm_function(llm)
    async def city(text: str) -> City:
        """Extract the city."""

    with anyio.fail_after(GUARD):
        result = await city("Oslo has 709k people.")
    assert result == City(name="Oslo", population=709000)
    body = mock_server.requests[0].json
    assert body["system"].startswith("Extract the city.")
    assert '"population"' in body["system"]  # the JSON contract is in the prompt
    assert {"response_format", "output_format"}.isdisjoint(body)


@pytest.mark.parametrize("stream", [False, True])
async def test_llm_chat_tool_turn(
    mock_server: MockLLMServer, llm: AnthropicCompatible, stream: bool
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="c1"),
            ToolCallSpec("weather", {"city": "Rome"}, id="c2"),
            text="Let me check.",
            chunks=3,
        ),
        Reply.text("Sunny in both.", chunks=3),
    )

    @llm_chat(llm, toolkit=[weather], stream=stream)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    outputs = await consume(agent("weather?", history=[]))
    assert "".join(text for text, _ in outputs) == "Let me check.Sunny in both."
    final = outputs[-1][1]
    history_from_dicts(final)
    assert [m["role"] for m in final] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert final[-1] == {"role": "assistant", "content": "Sunny in both."}
    second = mock_server.requests[1].json
    assert second.get("stream", False) is stream
    assert second["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
                {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny in Oslo"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "sunny in Rome"},
            ],
        },
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_llm_chat_does_not_run_a_truncated_tool_call(
    mock_server: MockLLMServer, llm: AnthropicCompatible, stream: bool
) -> None:
    runs: list[str] = []

    @tool
    async def save(text: str) -> str:
        """Save a text."""
        runs.append(text)
        return "saved"

    mock_server.script(
        Reply.tool_calls(ToolCallSpec("save", '{"text": "a long essay th'), finish_reason="length"),
        Reply.text("Sorry, my reply was cut."),
    )

    @llm_chat(llm, toolkit=[save], stream=stream, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You save texts."""

    items = await consume(agent("save an essay", history=[]))
    assert runs == []
    events = [i.event for i in items if isinstance(i, EventYield)]
    ends = [e for e in events if isinstance(e, ToolCallEndEvent)]
    assert not any(end.success for end in ends)
    result = mock_server.requests[1].json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result"
    assert "truncated" in result["content"]
    assert isinstance(items[-1], ResponseYield)
    assert items[-1].response == "Sorry, my reply was cut."


async def test_llm_chat_abort_mid_stream(
    mock_server: MockLLMServer, llm: AnthropicCompatible
) -> None:
    mock_server.script(Reply.text("x" * 200, chunks=200, chunk_delay=0.005), Reply.text("next"))
    abort = AbortSignal()
    chunks = 0

    @llm_chat(llm, stream=True, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    items: list[Any] = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("go", history=[], _abort_signal=abort)) as stream:
            async for item in stream:
                items.append(item)
                if isinstance(item, EventYield) and isinstance(item.event, LLMChunkArriveEvent):
                    chunks += 1
                    if chunks == 3:
                        abort.abort("stop")
    end = items[-2].event
    assert isinstance(end, ReactEndEvent)
    assert end.terminated_by == "aborted"
    history = items[-1].messages
    assert history[-1]["truncated"] is True
    assert history[-1]["content"].startswith("xxx")
    # The aborted history is valid for the next call, and the API accepts it.
    follow_up = await consume(agent("again", history=history))
    assert follow_up[-1].response == "next"
    assert mock_server.requests[1].json["messages"][-1] == {"role": "user", "content": "again"}
