"""OpenAICompatible at the wire: SSE oddities, tool-call delta shapes, usage, request bodies,
deadlines, cancellation and lifetime, all against the mock LLM server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any, Literal

import anyio
import httpx
import psutil
import pytest

from conftest import settle
from simplellmfunc._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from simplellmfunc.exceptions import (
    ProviderError,
    ProviderTimeoutError,
    StreamError,
    UserError,
)
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    LLMResponse,
    OpenAICompatible,
    ReasoningDelta,
    ResponseFormat,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    UsageEvent,
    count_message_tokens,
    count_text_tokens,
)
from simplellmfunc.providers._assembly import parse_arguments
from simplellmfunc.testing import DeltaShape, MockLLMServer, RecordedRequest, Reply, ToolCallSpec

KEY = "sk-test-provider-0123456789"
REQUEST = LLMRequest((SystemMessage("Be brief."), UserMessage("hi")))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
UNICODE = "héllo wörld — 你好, мир 🌍"

Api = Literal["complete", "stream"]


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible(KEY, "gpt-4o-mini", mock_server.url, retry_policy=FAST) as llm:
        yield llm


async def collect(llm: OpenAICompatible, request: LLMRequest = REQUEST) -> list[StreamEvent]:
    return [event async for event in llm.stream(request)]


async def call(llm: OpenAICompatible, api: Api, request: LLMRequest = REQUEST) -> LLMResponse:
    if api == "complete":
        return await llm.complete(request)
    events = await collect(llm, request)
    assert isinstance(events[-1], FinishEvent)
    assert not any(isinstance(e, FinishEvent) for e in events[:-1])
    return events[-1].response


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def client_sockets(server: MockLLMServer) -> list[Any]:
    """The client side of this process's open TCP connections to the mock server."""
    return [
        c
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port == server.port and c.status == psutil.CONN_ESTABLISHED
    ]


def sse_body(*chunks: dict[str, Any] | str, done: bool = True) -> str:
    """A hand-written SSE body (for shapes the scripted replies do not produce)."""
    lines = [f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-raw",
        "object": "chat.completion.chunk",
        "model": "raw",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


# -- the basics ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_text_reply_and_request_shape(
    mock_server: MockLLMServer, llm: OpenAICompatible, api: Api
) -> None:
    mock_server.script(Reply.text("Hello there", chunks=3))
    response = await call(llm, api)
    assert response.text == "Hello there"
    assert response.finish_reason == "stop"
    assert response.model == "gpt-4o-mini"
    assert response.request_id == "req_mock_1"
    assert response.provider == "openai"
    (recorded,) = mock_server.requests
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.json["model"] == "gpt-4o-mini"
    assert recorded.json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    if api == "stream":
        assert recorded.json["stream"] is True
        assert recorded.json["stream_options"] == {"include_usage": True}
    else:
        assert "stream" not in recorded.json


async def test_stream_events_come_in_order(mock_server: MockLLMServer, llm: OpenAICompatible):
    mock_server.script(Reply.text("abcdef", chunks=3, reasoning="think", usage=(7, 3)))
    events = await collect(llm)
    kinds = [e.kind for e in events]
    assert kinds == ["reasoning"] * 3 + ["text"] * 3 + ["usage", "finish"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd", "ef"]
    final = events[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.message.reasoning_details == (
        {"type": "reasoning.text", "text": "think"},
    )


async def test_non_ascii_request_goes_out_as_utf8(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("ok"))
    await llm.complete(LLMRequest((UserMessage(UNICODE),)))
    assert mock_server.requests[0].json["messages"][0]["content"] == UNICODE


async def test_keep_alive_reuses_one_connection(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.default = Reply.text("ok", chunks=4)
    ports = set()
    for api in ("stream", "complete", "stream", "stream"):
        await call(llm, api)  # type: ignore[arg-type]
        (idle,) = client_sockets(mock_server)  # still open, waiting in the pool
        ports.add(idle.laddr.port)
    # Streams read to the end of the body after [DONE], so the connection goes back to the pool.
    assert len(ports) == 1


# -- every SSE oddity through the provider -------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"keepalive": True},
        {"line_ending": "crlf"},
        {"line_ending": "cr"},
        {"split_utf8": True},
        {"split_utf8": True, "line_ending": "crlf", "keepalive": True},
    ],
    ids=["keepalive", "crlf", "cr", "split-utf8", "all-at-once"],
)
async def test_sse_oddities_give_the_same_reply(
    mock_server: MockLLMServer, llm: OpenAICompatible, options: dict[str, Any]
) -> None:
    mock_server.script(Reply.text(UNICODE, chunks=6, **options))
    events = await collect(llm)
    assert text_of(events) == UNICODE
    final = events[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.text == UNICODE
    assert final.response.usage.prompt_tokens == 10


async def test_multiline_data_and_comments_in_a_hand_written_stream(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    first = json.dumps(chunk({"content": "multi"}), indent=1)  # JSON over several data lines
    body = (
        ": comment\n\n"
        "event: message\n" + "".join(f"data: {line}\n" for line in first.split("\n")) + "\n"
        "data:\n\n"  # empty data: never parsed as JSON
        "id: 7\nretry: 100\ndata: " + json.dumps(chunk({"content": "line"}, "stop")) + "\n\n"
        "data: [DONE]\n\n"
    )
    mock_server.script(Reply.error(200, body=body))
    # An empty data field dispatches an event with empty data, which the provider skips...
    assert text_of(await collect(llm)) == "multiline"
    # ...as it skips a block without any data line, which is not an event at all.
    mock_server.script(Reply.error(200, body=body.replace("data:\n\n", ": nothing\n\n")))
    assert text_of(await collect(llm)) == "multiline"


async def test_malformed_chunk_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("some text here", chunks=4, malformed=True))
    with pytest.raises(StreamError, match="malformed stream chunk") as caught:
        await collect(llm)
    assert caught.value.status == 200
    assert caught.value.request_id == "req_mock_1"
    assert len(mock_server.requests) == 1


@pytest.mark.parametrize("style", ["data", "event"])
async def test_error_after_200_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAICompatible, style: Literal["data", "event"]
) -> None:
    error = {"message": "the model is overloaded", "type": "server_error"}
    mock_server.script(Reply.text("partial", chunks=2, error_event=error, error_event_style=style))
    with pytest.raises(StreamError, match="the model is overloaded"):
        await collect(llm)


async def test_error_object_in_a_200_completion_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("x", error_event={"message": "quota gone"}))
    with pytest.raises(StreamError, match="quota gone"):
        await llm.complete(REQUEST)


async def test_missing_done_after_a_finish_reason_is_fine(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    body = sse_body(chunk({"content": "complete"}), chunk({}, "stop"), done=False)
    mock_server.script(Reply.error(200, body=body))
    events = await collect(llm)
    assert text_of(events) == "complete"
    final = events[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.finish_reason == "stop"


async def test_stream_ending_without_done_or_finish_reason_is_an_error(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.error(200, body=sse_body(chunk({"content": "cut"}), done=False)))
    with pytest.raises(StreamError, match="ended before the reply was complete"):
        await collect(llm)


async def test_disconnect_mid_stream_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("never finished", chunks=5, disconnect_after=3))
    received: list[StreamEvent] = []

    async def consume() -> None:
        async for event in llm.stream(REQUEST):
            received.append(event)

    with pytest.raises(StreamError, match="stream broken") as caught:
        await consume()
    assert text_of(received) == "never "  # "nev", "er ", then the cut
    assert caught.value.retryable
    assert len(mock_server.requests) == 1


async def test_a_chunk_that_is_not_an_object_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.error(200, body=sse_body("[1, 2]")))
    with pytest.raises(StreamError, match="not an object"):
        await collect(llm)
    mock_server.script(Reply.error(200, body=sse_body({"choices": ["nonsense"]})))
    with pytest.raises(StreamError, match="without a delta"):
        await collect(llm)


# -- tool calls ----------------------------------------------------------------------------------

SHAPES: list[DeltaShape] = ["standard", "repeat_id_name", "all_index_0", "no_index", "no_id"]
WEATHER = ToolCallSpec("get_weather", {"city": "Paris", "unit": "°C"}, id="call_w")
TIME = ToolCallSpec("get_time", {"zone": "Europe/Paris"}, id="call_t")
NO_ARGS = ToolCallSpec("ping", {}, id="call_p")


@pytest.mark.parametrize("api", ["complete", "stream"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("calls", [1, 3], ids=["single", "parallel"])
async def test_tool_call_shapes_assemble_into_the_right_calls(
    mock_server: MockLLMServer, llm: OpenAICompatible, shape: DeltaShape, api: Api, calls: int
) -> None:
    specs = [WEATHER, TIME, NO_ARGS][:calls]
    mock_server.script(Reply.tool_calls(*specs, chunks=4, delta_shape=shape))
    request = LLMRequest(REQUEST.messages, tools=(ToolSpec("get_weather", "", {}),))
    response = await call(llm, api, request)
    assert response.finish_reason == "tool_calls"
    assert response.text == ""
    got = response.message.tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in got] == [
        (s.name, dict(s.arguments))
        for s in specs  # type: ignore[arg-type]
    ]
    if shape == "no_id":
        ids = [c.id for c in got]
        assert all(ids)
        assert len(set(ids)) == len(ids)
    else:
        assert [c.id for c in got] == [s.id for s in specs]


async def test_streamed_tool_call_deltas_are_normalised(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.tool_calls(WEATHER, TIME, chunks=3, delta_shape="all_index_0"))
    deltas = [e for e in await collect(llm) if isinstance(e, ToolCallDelta)]
    assert {d.index for d in deltas} == {0, 1}  # two calls, although the server said 0 for both
    assert [d.name for d in deltas if d.name] == ["get_weather", "get_time"]
    first = "".join(d.arguments for d in deltas if d.index == 0)
    assert json.loads(first) == dict(WEATHER.arguments)  # type: ignore[arg-type]


async def test_interleaved_parallel_deltas_never_merge(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    def part(index: int, args: str, **ident: str) -> dict[str, Any]:
        function = {"arguments": args, **({"name": ident["name"]} if "name" in ident else {})}
        extra = {"id": ident["id"], "type": "function"} if "id" in ident else {}
        return chunk({"tool_calls": [{"index": index, **extra, "function": function}]})

    body = sse_body(
        part(0, "", id="call_a", name="add"),
        part(1, "", id="call_b", name="add"),
        part(0, '{"a": '),
        part(1, '{"a": '),
        part(1, "2}"),
        part(0, "1}"),
        chunk({}, "tool_calls"),
    )
    mock_server.script(Reply.error(200, body=body))
    final = (await collect(llm))[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.message.tool_calls == (
        ToolCall("call_a", "add", '{"a": 1}'),
        ToolCall("call_b", "add", '{"a": 2}'),
    )


async def test_text_before_tool_calls(mock_server: MockLLMServer, llm: OpenAICompatible):
    mock_server.script(Reply.tool_calls(WEATHER, text="Let me check.", chunks=2))
    events = await collect(llm)
    assert text_of(events) == "Let me check."
    final = events[-1]
    assert isinstance(final, FinishEvent)
    assert final.response.text == "Let me check."
    assert [c.name for c in final.response.message.tool_calls] == ["get_weather"]


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_truncated_arguments_stay_raw(
    mock_server: MockLLMServer, llm: OpenAICompatible, api: Api
) -> None:
    broken = '{"city": "Par'
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("get_weather", broken), chunks=3, finish_reason="length")
    )
    response = await call(llm, api)
    (tool_call,) = response.message.tool_calls
    assert tool_call.arguments == broken  # never "repaired" into something else
    assert response.finish_reason == "length"
    parsed, problem = parse_arguments(tool_call.arguments)
    assert parsed is None
    assert problem is not None
    assert "truncated" in problem


async def test_ids_made_up_for_id_less_calls_differ_between_replies(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    calls = ToolCallSpec("ping", {})
    mock_server.script(*[Reply.tool_calls(calls, delta_shape="no_id")] * 4)
    ids = set()
    for api in ("complete", "complete", "stream", "stream"):
        response = await call(llm, api)  # type: ignore[arg-type]
        ids.add(response.message.tool_calls[0].id)
    assert len(ids) == 4  # a history may not reuse a tool-call id


# -- usage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_reported_usage(mock_server: MockLLMServer, llm: OpenAICompatible, api: Api):
    mock_server.script(Reply.text("ok", usage=(12, 3)))
    usage = (await call(llm, api)).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (12, 3, 15)
    assert (usage.calls, usage.estimated) == (1, False)


async def test_streamed_usage_arrives_as_an_event(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("ok", usage=(12, 3)))
    (usage_event,) = [e for e in await collect(llm) if isinstance(e, UsageEvent)]
    assert usage_event.usage.total_tokens == 15


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_missing_usage_is_counted_locally(
    mock_server: MockLLMServer, llm: OpenAICompatible, api: Api
) -> None:
    mock_server.script(Reply.text("The answer is forty-two.", usage=None))
    usage = (await call(llm, api)).usage
    assert (usage.estimated, usage.calls) == (True, 1)
    assert usage.prompt_tokens == count_message_tokens(REQUEST.messages, "gpt-4o-mini") > 0
    assert usage.completion_tokens == count_text_tokens("The answer is forty-two.", "gpt-4o") > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_include_usage_rejected_is_retried_without_and_remembered(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    def strict_server(request: RecordedRequest) -> Reply:
        if "stream_options" in request.json:
            return Reply.error(400, "Unrecognized request argument supplied: stream_options")
        return Reply.text("fine", usage=None)

    mock_server.default = strict_server
    first = await call(llm, "stream")
    second = await call(llm, "stream")
    assert first.text == second.text == "fine"
    assert first.usage.estimated
    assert second.usage.estimated
    sent = [("stream_options" in r.json) for r in mock_server.requests]
    assert sent == [True, False, False]  # rejected once, then never sent again


async def test_other_400s_are_not_mistaken_for_the_usage_option(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.error(400, "messages: too long"))
    with pytest.raises(ProviderError, match="too long"):
        await collect(llm)
    assert len(mock_server.requests) == 1


async def test_stream_usage_capability_off_never_asks(mock_server: MockLLMServer) -> None:
    caps = Capabilities(stream_usage=False)
    mock_server.script(Reply.text("ok"))
    async with OpenAICompatible(None, "m", mock_server.url, capabilities=caps) as llm:
        await collect(llm)
    assert "stream_options" not in mock_server.requests[0].json


# -- the deadline ----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_slow_drip_ends_at_the_deadline(
    mock_server: MockLLMServer, llm: OpenAICompatible, api: Api
) -> None:
    # A byte every 50 ms never trips httpx's per-read timeout; only the call deadline ends it.
    mock_server.script(Reply.text("drip", drip=0.05))
    with pytest.raises(ProviderTimeoutError):
        await call(llm, api, LLMRequest(REQUEST.messages, timeout=0.5))
    assert len(mock_server.requests) == 1


async def test_interface_default_timeout_applies(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("drip", drip=0.05))
    async with OpenAICompatible(None, "m", mock_server.url, timeout=0.3) as llm:
        with pytest.raises(ProviderTimeoutError):
            await collect(llm)


# -- request bodies --------------------------------------------------------------------------------

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


@pytest.mark.parametrize("json_schema", [True, False])
async def test_response_format_only_with_the_capability(
    mock_server: MockLLMServer, json_schema: bool
) -> None:
    caps = Capabilities(json_schema=json_schema)
    request = LLMRequest(REQUEST.messages, response_format=ResponseFormat("answer", SCHEMA, True))
    mock_server.script(Reply.text('{"n": 1}'))
    async with OpenAICompatible(None, "m", mock_server.url, capabilities=caps) as llm:
        await llm.complete(request)
    body = mock_server.requests[0].json
    if json_schema:
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
        }
    else:
        assert "response_format" not in body


async def test_tools_tool_choice_and_extra_params_are_sent(mock_server: MockLLMServer) -> None:
    tool = ToolSpec("get_weather", "Weather of a city.", SCHEMA)
    choice = {"type": "function", "function": {"name": "get_weather"}}
    request = LLMRequest(
        REQUEST.messages,
        tools=(tool,),
        tool_choice=choice,
        params={"max_tokens": 50, "seed": 7, "temperature": 0.0},
    )
    mock_server.script(Reply.text("ok"))
    async with OpenAICompatible(
        None, "m", mock_server.url, temperature=0.5, top_p=0.9, user="u-1"
    ) as llm:
        await llm.complete(request)
    body = mock_server.requests[0].json
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather of a city.",
                "parameters": SCHEMA,
            },
        }
    ]
    assert body["tool_choice"] == choice
    # Interface defaults go with every call; the request's own params win over them.
    assert (body["temperature"], body["top_p"], body["user"]) == (0.0, 0.9, "u-1")
    assert (body["max_tokens"], body["seed"]) == (50, 7)


async def test_tools_are_left_out_without_native_tools(mock_server: MockLLMServer) -> None:
    caps = Capabilities(native_tools=False)
    request = LLMRequest(REQUEST.messages, tools=(ToolSpec("t", "", {}),), tool_choice="auto")
    mock_server.script(Reply.text("ok"))
    async with OpenAICompatible(None, "m", mock_server.url, capabilities=caps) as llm:
        await llm.complete(request)
    assert "tools" not in mock_server.requests[0].json
    assert "tool_choice" not in mock_server.requests[0].json


@pytest.mark.parametrize(("allowed", "sent"), [(True, None), (False, "")])
async def test_null_assistant_content(
    mock_server: MockLLMServer, allowed: bool, sent: str | None
) -> None:
    call_ = ToolCall("call_1", "ping", "{}")
    history = (
        UserMessage("ping it"),
        AssistantMessage(None, (call_,)),
        ToolMessage("call_1", "pong"),
    )
    caps = Capabilities(null_assistant_content=allowed)
    mock_server.script(Reply.text("done"))
    async with OpenAICompatible(None, "m", mock_server.url, capabilities=caps) as llm:
        await llm.complete(LLMRequest(history))
    assistant = mock_server.requests[0].json["messages"][1]
    assert assistant == {"role": "assistant", "content": sent, "tool_calls": [call_.to_dict()]}
    assert mock_server.requests[0].json["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "pong",
    }


async def test_headers_and_no_key(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("ok"))
    async with OpenAICompatible(None, "m", mock_server.url + "/", headers={"x-team": "a"}) as llm:
        assert llm.base_url == mock_server.url
        await llm.complete(REQUEST)
    headers = mock_server.requests[0].headers
    assert headers["x-team"] == "a"
    assert "authorization" not in headers


# -- odd responses ---------------------------------------------------------------------------------


async def test_completion_that_is_not_json(mock_server: MockLLMServer, llm: OpenAICompatible):
    mock_server.script(Reply.error(200, body="<html>proxy error</html>"))
    with pytest.raises(ProviderError, match="not valid JSON") as caught:
        await llm.complete(REQUEST)
    assert "proxy error" in caught.value.body_excerpt


async def test_completion_without_choices(mock_server: MockLLMServer, llm: OpenAICompatible):
    mock_server.script(Reply.error(200, body={"id": "x", "choices": []}))
    with pytest.raises(ProviderError, match="no choices"):
        await llm.complete(REQUEST)


# -- cancellation and lifetime ---------------------------------------------------------------------


async def _wait_for_request(server: MockLLMServer, count: int = 1) -> None:
    assert await settle(lambda: len(server.requests) >= count)


async def _assert_released(
    server: MockLLMServer, llm: OpenAICompatible, *, half_read: bool = True
) -> None:
    assert llm.key_pool is not None
    assert [s["in_flight"] for s in llm.key_pool.status()] == [0]
    if half_read:
        # The half-read response's connection is closed, not parked in the pool.
        assert await settle(lambda: not client_sockets(server)), client_sockets(server)


async def test_cancel_a_stream_consumer_mid_stream(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("forever", drip=0.01), Reply.text("next"))
    received: list[StreamEvent] = []
    with anyio.CancelScope() as scope:
        async for event in llm.stream(REQUEST):
            received.append(event)
            if len(received) == 3:
                scope.cancel()
    assert scope.cancelled_caught
    await _assert_released(mock_server, llm)
    assert (await llm.complete(REQUEST)).text == "next"


async def test_breaking_out_of_a_stream_releases_everything_at_once(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("forever", drip=0.01))
    async with aclosing(llm.stream(REQUEST)) as events:
        async for _ in events:
            break
    # aclose() of the outer generator closed the inner ones in this task, right away.
    assert llm.key_pool is not None
    assert llm.key_pool.status()[0]["in_flight"] == 0
    await _assert_released(mock_server, llm)


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_cancel_while_waiting_for_headers(
    mock_server: MockLLMServer, llm: OpenAICompatible, api: Api
) -> None:
    mock_server.script(Reply.text("late", ttft=30))
    async with anyio.create_task_group() as group:
        group.start_soon(call, llm, api)
        await _wait_for_request(mock_server)
        group.cancel_scope.cancel()
    await _assert_released(mock_server, llm)


async def test_cancel_while_reading_a_completion_body(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("json drip", drip=0.01))
    with anyio.move_on_after(0.2) as scope:
        await llm.complete(REQUEST)
    assert scope.cancelled_caught
    await _assert_released(mock_server, llm)


async def test_cancel_while_waiting_for_a_cooling_key(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.error(429, headers={"retry-after": "20"}))
    async with OpenAICompatible(KEY, "m", mock_server.url, retry_policy=RetryPolicy()) as llm:
        with anyio.move_on_after(0.3) as scope:
            await llm.complete(REQUEST)
        assert scope.cancelled_caught
        # The 429 was read whole: its connection may wait in the pool for the next call.
        await _assert_released(mock_server, llm, half_read=False)
    assert len(mock_server.requests) == 1


async def test_async_with_closes_the_client(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok")
    async with OpenAICompatible(KEY, "m", mock_server.url) as llm:
        await llm.complete(REQUEST)
        assert len(client_sockets(mock_server)) == 1  # kept alive while open
    assert await settle(lambda: not client_sockets(mock_server))
    with pytest.raises(UserError, match="closed"):
        await llm.complete(REQUEST)
    with pytest.raises(UserError, match="closed"):
        await collect(llm)
    await llm.aclose()  # idempotent


async def test_a_borrowed_http_client_is_left_open(mock_server: MockLLMServer) -> None:
    mock_server.default = Reply.text("ok")
    async with httpx.AsyncClient() as client:
        async with OpenAICompatible(None, "m", mock_server.url, http_client=client) as llm:
            await llm.complete(REQUEST)
        assert not client.is_closed
        assert (await llm.complete(REQUEST)).text == "ok"


# -- reprs and token counting ----------------------------------------------------------------------


async def test_repr_shows_no_key(llm: OpenAICompatible) -> None:
    text = repr(llm)
    assert KEY not in text
    assert "…6789" in text
    assert "gpt-4o-mini" in text


async def test_count_tokens_uses_tiktoken(llm: OpenAICompatible) -> None:
    one = await llm.count_tokens([UserMessage("hello world")])
    many = await llm.count_tokens([UserMessage("hello world " * 50)])
    assert 0 < one < many


async def test_reasoning_stream_and_completion(mock_server: MockLLMServer, llm: OpenAICompatible):
    mock_server.script(Reply.text("42", reasoning="Six times seven.", chunks=2))
    events = await collect(llm)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Six times seven."
    mock_server.script(Reply.text("42", reasoning="Six times seven."))
    response = await llm.complete(REQUEST)
    assert response.message.reasoning_details == (
        {"type": "reasoning.text", "text": "Six times seven."},
    )
