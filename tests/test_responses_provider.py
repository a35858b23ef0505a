"""OpenAIResponsesCompatible at the wire, against the mock server's ``/v1/responses``: request
items, function-call round trips, reasoning kept, multimodal input, every stream event, usage,
errors after a 200, retries, and the decorators driving it."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import psutil
import pytest
from pydantic import BaseModel

from simplellmfunc import ImgPath, ImgUrl, Text, llm_chat, llm_function, tool
from simplellmfunc._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from simplellmfunc._usage import Usage
from simplellmfunc.exceptions import (
    AuthenticationError,
    ProviderError,
    ProviderTimeoutError,
    StreamError,
)
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    LLMResponse,
    ReasoningDelta,
    ResponseFormat,
    RetryPolicy,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    UsageEvent,
)
from simplellmfunc.providers._assembly import parse_arguments
from simplellmfunc.providers._responses import OpenAIResponsesCompatible
from simplellmfunc.providers._responses._wire import ITEM_ORDER
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

KEY = "sk-test-responses-0123456789"
REQUEST = LLMRequest((SystemMessage("Be brief."), UserMessage("hi")))
FAST = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.02)
UNICODE = "héllo wörld — 你好, мир 🌍"
WEATHER = ToolCallSpec("get_weather", {"city": "Paris", "unit": "°C"}, id="call_w")
TIME = ToolCallSpec("get_time", {"zone": "Europe/Paris"}, id="call_t")
GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

Api = Literal["complete", "stream"]


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAIResponsesCompatible]:
    async with OpenAIResponsesCompatible(KEY, "gpt-5", mock_server.url, retry_policy=FAST) as llm:
        yield llm


async def collect(llm: OpenAIResponsesCompatible, request: LLMRequest = REQUEST) -> list[Any]:
    with anyio.fail_after(GUARD):
        return [event async for event in llm.stream(request)]


async def call(
    llm: OpenAIResponsesCompatible, api: Api, request: LLMRequest = REQUEST
) -> LLMResponse:
    if api == "complete":
        with anyio.fail_after(GUARD):
            return await llm.complete(request)
    events = await collect(llm, request)
    assert isinstance(events[-1], FinishEvent)
    assert not any(isinstance(e, FinishEvent) for e in events[:-1])
    return events[-1].response


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def sse(*events: dict[str, Any]) -> str:
    """A hand-written Responses stream (for shapes the scripted replies do not produce)."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def completed(output: list[Any] | None = None, **fields: Any) -> dict[str, Any]:
    response = {"id": "resp_raw", "status": "completed", "model": "raw", "output": output or []}
    return {"type": "response.completed", "response": {**response, **fields}}


# -- request shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_text_reply_and_request_shape(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api
) -> None:
    mock_server.script(Reply.text("Hello there", chunks=3))
    response = await call(llm, api)
    assert response.text == "Hello there"
    assert response.finish_reason == "stop"
    assert response.model == "gpt-5"
    assert response.request_id == "req_mock_1"
    assert response.provider == "openai"
    assert response.message.reasoning_details == ()
    (recorded,) = mock_server.requests
    assert recorded.path == "/v1/responses"
    assert recorded.headers["authorization"].startswith("Bearer sk-")
    assert KEY not in json.dumps(recorded.headers)
    body = recorded.json
    assert body["model"] == "gpt-5"
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    ]
    assert ("stream" in body) is (api == "stream")
    if api == "complete":
        assert response.raw is not None
        assert response.raw["object"] == "response"


async def test_tools_choice_format_and_params(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("{}"), Reply.text("{}"))
    fmt = ResponseFormat("person", {"type": "object", "properties": {}}, strict=True)
    request = LLMRequest(
        REQUEST.messages,
        tools=(ToolSpec("add", "Add numbers.", {"type": "object", "properties": {}}),),
        tool_choice={"type": "function", "function": {"name": "add"}},
        response_format=fmt,
        params={"max_tokens": 50, "text": {"verbosity": "low"}, "store": False},
    )
    async with OpenAIResponsesCompatible(
        KEY, "gpt-5", mock_server.url, temperature=0.2, reasoning={"effort": "low"}
    ) as llm:
        await llm.complete(request)
        await llm.complete(
            LLMRequest(REQUEST.messages, tool_choice="required", tools=request.tools)
        )
    body = mock_server.requests[0].json
    assert body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add numbers.",
            "parameters": {"type": "object", "properties": {}},
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "add"}
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "person",
            "schema": {"type": "object", "properties": {}},
            "strict": True,
        },
        "verbosity": "low",
    }
    assert body["max_output_tokens"] == 50
    assert "max_tokens" not in body
    assert body["temperature"] == 0.2
    assert body["reasoning"] == {"effort": "low"}
    assert body["store"] is False
    assert mock_server.requests[1].json["tool_choice"] == "required"


async def test_capabilities_leave_out_tools_and_schema(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("ok"))
    caps = Capabilities(native_tools=False, json_schema=False)
    request = LLMRequest(
        REQUEST.messages,
        tools=(ToolSpec("add", "", {}),),
        tool_choice="auto",
        response_format=ResponseFormat("x", {}),
    )
    async with OpenAIResponsesCompatible(None, "m", mock_server.url, capabilities=caps) as llm:
        await llm.complete(request)
    (recorded,) = mock_server.requests
    assert {"tools", "tool_choice", "text"}.isdisjoint(recorded.json)
    assert "authorization" not in recorded.headers


async def test_multimodal_user_content_is_preserved(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, tmp_path: Path
) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    url = "https://example.com/cat.png"
    mock_server.script(Reply.text("a cat"))
    user = UserMessage((Text("What is this?"), ImgUrl(url, "low"), ImgPath(image)))
    await llm.complete(LLMRequest((user,)))
    (item,) = mock_server.requests[0].json["input"]
    assert item == {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": url, "detail": "low"},
            {
                "type": "input_image",
                "image_url": "data:image/png;base64," + base64.b64encode(PNG).decode(),
                "detail": "auto",
            },
        ],
    }


async def test_non_ascii_goes_out_as_utf8(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text(UNICODE))
    response = await llm.complete(LLMRequest((UserMessage(UNICODE),)))
    assert response.text == UNICODE
    assert mock_server.requests[0].json["input"][0]["content"][0]["text"] == UNICODE


# -- function calls --------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
@pytest.mark.parametrize("calls", [1, 2], ids=["single", "parallel"])
async def test_function_calls_are_parsed(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api, calls: int
) -> None:
    specs = [WEATHER, TIME][:calls]
    mock_server.script(Reply.tool_calls(*specs, chunks=4))
    response = await call(llm, api)
    assert response.finish_reason == "tool_calls"
    assert response.text == ""
    assert response.message.content is None
    assert [(c.id, c.name, json.loads(c.arguments)) for c in response.message.tool_calls] == [
        (s.id, s.name, dict(s.arguments))  # type: ignore[arg-type]
        for s in specs
    ]


async def test_streamed_argument_deltas(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.tool_calls(WEATHER, TIME, text="Checking.", chunks=3))
    events = await collect(llm)
    assert text_of(events) == "Checking."
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [(d.index, d.id, d.name) for d in deltas if d.name] == [
        (0, "call_w", "get_weather"),
        (1, "call_t", "get_time"),
    ]
    assert all(d.id == ("call_w", "call_t")[d.index] for d in deltas)
    for index, spec in enumerate((WEATHER, TIME)):
        pieces = [d.arguments for d in deltas if d.index == index and d.arguments]
        assert len(pieces) == 3
        assert json.loads("".join(pieces)) == dict(spec.arguments)  # type: ignore[arg-type]


async def test_function_call_round_trip(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.tool_calls(WEATHER, text="Let me check."), Reply.text("Sunny."))
    first = await llm.complete(REQUEST)
    (weather_call,) = first.message.tool_calls
    history = (
        *REQUEST.messages,
        first.message,
        ToolMessage(weather_call.id, "sunny, 21 °C"),
    )
    second = await llm.complete(LLMRequest(history))
    assert second.text == "Sunny."
    assert mock_server.requests[1].json["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me check.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_w",
            "name": "get_weather",
            "arguments": WEATHER.arguments_json(),
        },
        {"type": "function_call_output", "call_id": "call_w", "output": "sunny, 21 °C"},
    ]


async def test_tool_result_with_an_image_is_sent_as_parts(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("ok"))
    url = "https://example.com/chart.png"
    history = (
        UserMessage("plot"),
        AssistantMessage(None, (ToolCall("c1", "plot", "{}"),)),
        ToolMessage("c1", (Text("here"), ImgUrl(url))),
    )
    await llm.complete(LLMRequest(history))
    sent = mock_server.requests[0].json["input"]
    assert sent[1] == {"type": "function_call", "call_id": "c1", "name": "plot", "arguments": "{}"}
    assert sent[2] == {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [
            {"type": "input_text", "text": "here"},
            {"type": "input_image", "image_url": url, "detail": "auto"},
        ],
    }


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_incomplete_means_length_and_arguments_stay_raw(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api
) -> None:
    broken = '{"city": "Par'
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("get_weather", broken), chunks=3, finish_reason="length")
    )
    response = await call(llm, api)
    assert response.finish_reason == "length"
    (tool_call,) = response.message.tool_calls
    assert tool_call.arguments == broken
    parsed, problem = parse_arguments(tool_call.arguments)
    assert parsed is None
    assert problem is not None
    assert "truncated" in problem


# -- reasoning -------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_reasoning_items_are_kept_and_sent_back(mock_server: MockLLMServer, api: Api) -> None:
    mock_server.script(
        Reply.tool_calls(WEATHER, text="Checking.", reasoning="the user wants weather"),
        Reply.text("Sunny."),
    )
    include = ["reasoning.encrypted_content"]
    async with OpenAIResponsesCompatible(
        KEY, "gpt-5", mock_server.url, store=False, include=include
    ) as llm:
        first = await call(llm, api)
        reasoning, order = first.message.reasoning_details
        assert reasoning["type"] == "reasoning"
        assert reasoning["id"] == "rs_mock1"
        assert reasoning["summary"] == [{"type": "summary_text", "text": "the user wants weather"}]
        assert reasoning["encrypted_content"]
        assert order == {
            "type": ITEM_ORDER,
            "items": [
                {"type": "reasoning", "id": "rs_mock1"},
                {"type": "message", "id": "msg_mock1"},
                {"type": "function_call", "id": "fc_mock1_0"},
            ],
        }
        history = (*REQUEST.messages, first.message, ToolMessage("call_w", "sunny"))
        await call(llm, api, LLMRequest(history))
    sent = mock_server.requests[1].json
    assert sent["store"] is False
    assert sent["include"] == include
    assert sent["input"][1] == dict(reasoning)  # verbatim, encrypted content included
    assert sent["input"][2]["id"] == "msg_mock1"  # the items it belongs to keep their ids
    assert sent["input"][2]["content"][0]["text"] == "Checking."
    assert sent["input"][3]["id"] == "fc_mock1_0"
    assert sent["input"][3]["call_id"] == "call_w"
    assert sent["input"][4] == {
        "type": "function_call_output",
        "call_id": "call_w",
        "output": "sunny",
    }


async def test_reasoning_survives_the_chat_dict_history(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("4", reasoning="2+2"), Reply.text("ok"))
    first = await llm.complete(LLMRequest((UserMessage("2+2?"),)))
    dicts = [
        {"role": "user", "content": "2+2?"},
        {
            "role": "assistant",
            "content": first.text,
            "reasoning_details": [dict(r) for r in first.message.reasoning_details],
        },
        {"role": "user", "content": "thanks"},
    ]
    await llm.complete(LLMRequest(history_from_dicts(json.loads(json.dumps(dicts)))))
    kinds = [
        (i.get("type"), i.get("role"), i.get("id")) for i in mock_server.requests[1].json["input"]
    ]
    assert kinds == [
        ("message", "user", None),
        ("reasoning", None, "rs_mock1"),
        ("message", "assistant", "msg_mock1"),
        ("message", "user", None),
    ]


async def test_reasoning_of_other_providers_is_not_sent(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("ok"))
    other = AssistantMessage("4", reasoning_details=({"type": "reasoning.text", "text": "2+2"},))
    await llm.complete(LLMRequest((UserMessage("2+2?"), other, UserMessage("ok?"))))
    assert [i["role"] for i in mock_server.requests[0].json["input"]] == [
        "user",
        "assistant",
        "user",
    ]


async def test_reasoning_summary_streams_before_the_text(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("abcdef", chunks=3, reasoning="think", usage=(7, 3)))
    events = await collect(llm)
    assert [e.kind for e in events] == ["reasoning"] * 3 + ["text"] * 3 + ["usage", "finish"]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "think"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ab", "cd", "ef"]


# -- usage -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_reported_usage(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.text("hi", usage=Usage(120, 30, cached_tokens=100, reasoning_tokens=20))
    )
    response = await call(llm, api)
    assert response.usage == Usage(120, 30, 150, 100, 20, calls=1)


async def test_usage_arrives_as_an_event(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("hi", usage=(9, 4)))
    usage = [e for e in await collect(llm) if isinstance(e, UsageEvent)]
    assert [(u.usage.prompt_tokens, u.usage.completion_tokens) for u in usage] == [(9, 4)]


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_missing_usage_is_counted_locally(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api
) -> None:
    mock_server.script(Reply.text("Hello there", usage=None))
    response = await call(llm, api)
    assert response.usage.estimated
    assert response.usage.calls == 1
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0


# -- the mock stream itself, read with raw httpx ---------------------------------------------------


async def test_mock_stream_is_numbered_like_the_real_api(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.tool_calls(WEATHER, text="hi!", reasoning="r", chunks=2))
    async with httpx.AsyncClient() as client:
        response = await client.post(
            f"{mock_server.url}/responses", json={"model": "m", "input": "x", "stream": True}
        )
    blocks = [b for b in response.text.split("\n\n") if b]
    names = [b.split("\n")[0].removeprefix("event: ") for b in blocks]
    payloads = [json.loads(b.split("\n")[1].removeprefix("data: ")) for b in blocks]
    assert names == [p["type"] for p in payloads]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert [(p["output_index"], p["item"]["type"]) for p in added] == [
        (0, "reasoning"),
        (1, "message"),
        (2, "function_call"),
    ]
    text = [p for p in payloads if p["type"] == "response.output_text.delta"]
    assert {(p["item_id"], p["output_index"], p["content_index"]) for p in text} == {
        ("msg_mock1", 1, 0)
    }
    final = payloads[-1]["response"]
    assert final["status"] == "completed"
    assert [item["id"] for item in final["output"]] == ["rs_mock1", "msg_mock1", "fc_mock1_0"]


# -- SSE oddities and hand-written streams ---------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [{"keepalive": True}, {"line_ending": "crlf"}, {"line_ending": "cr"}, {"split_utf8": True}],
    ids=["keepalive", "crlf", "cr", "split-utf8"],
)
async def test_sse_oddities_give_the_same_reply(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, options: dict[str, Any]
) -> None:
    mock_server.script(Reply.text(UNICODE, chunks=6, **options))
    events = await collect(llm)
    assert text_of(events) == UNICODE
    assert events[-1].response.text == UNICODE


async def test_completed_without_output_is_rebuilt_from_the_stream(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    call_item = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "add"}
    body = sse(
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Sum: "},
        {"type": "response.output_item.added", "output_index": 1, "item": call_item},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"a":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": "1}"},
        completed(usage={"input_tokens": 3, "output_tokens": 2}),
    )
    mock_server.script(Reply.error(200, body=body))
    response = (await collect(llm))[-1].response
    assert response.text == "Sum: "
    assert response.message.tool_calls == (ToolCall("c1", "add", '{"a":1}'),)
    assert response.finish_reason == "tool_calls"
    assert response.usage.prompt_tokens == 3


async def test_events_without_event_lines_and_unknown_events(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    events = [
        {"type": "response.some_future_event", "x": 1},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "fine"},
        completed([{"type": "message", "content": [{"type": "output_text", "text": "fine"}]}]),
    ]
    body = ": comment\n\n" + "".join(f"data: {json.dumps(e)}\n\n" for e in events)
    mock_server.script(Reply.error(200, body=body))
    assert (await collect(llm))[-1].response.text == "fine"


async def test_refusal_and_reasoning_text_deltas(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    refusal = [{"type": "refusal", "refusal": "I can't help with that."}]
    body = sse(
        {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "risky"},
        {"type": "response.refusal.delta", "output_index": 1, "delta": "I can't help with that."},
        completed([{"type": "message", "id": "msg_1", "content": refusal}]),
    )
    mock_server.script(Reply.error(200, body=body))
    events = await collect(llm)
    assert [type(e) for e in events] == [ReasoningDelta, TextDelta, FinishEvent]
    assert events[-1].response.text == "I can't help with that."
    assert events[-1].response.finish_reason == "stop"


# -- errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["data", "event"])
async def test_error_event_after_200_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, style: Literal["data", "event"]
) -> None:
    error = {"message": "the model is overloaded", "code": "server_error"}
    mock_server.script(Reply.text("partial", chunks=2, error_event=error, error_event_style=style))
    received: list[StreamEvent] = []

    async def consume() -> None:
        async for event in llm.stream(REQUEST):
            received.append(event)

    with pytest.raises(StreamError, match="the model is overloaded") as caught:
        await consume()
    assert text_of(received) == "partial"
    assert caught.value.status == 200
    assert caught.value.request_id == "req_mock_1"
    assert len(mock_server.requests) == 1  # never retried once the stream started


async def test_response_failed_event_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    failed = {
        "type": "response.failed",
        "response": {"status": "failed", "error": {"code": "server_error", "message": "boom"}},
    }
    mock_server.script(Reply.error(200, body=sse(failed)))
    with pytest.raises(StreamError, match=r"response failed: boom \(server_error\)"):
        await collect(llm)


async def test_failed_response_object_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("x", error_event={"message": "quota gone"}))
    with pytest.raises(StreamError, match="quota gone"):
        await llm.complete(REQUEST)


async def test_response_without_output_is_an_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.error(200, body={"id": "x", "status": "completed"}))
    with pytest.raises(ProviderError, match="no output"):
        await llm.complete(REQUEST)


async def test_stream_without_completed_is_an_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "cut"}
    mock_server.script(Reply.error(200, body=sse(delta)))
    with pytest.raises(StreamError, match=r"ended before response\.completed"):
        await collect(llm)


async def test_disconnect_mid_stream_is_a_retryable_stream_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("never finished", chunks=5, disconnect_after=6))
    with pytest.raises(StreamError, match="stream broken") as caught:
        await collect(llm)
    assert caught.value.retryable
    assert len(mock_server.requests) == 1


async def test_malformed_event_is_a_stream_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("some text here", chunks=4, malformed=True))
    with pytest.raises(StreamError, match="malformed stream event"):
        await collect(llm)
    mock_server.script(Reply.error(200, body="data: [1, 2]\n\n"))
    with pytest.raises(StreamError, match="not an object"):
        await collect(llm)


async def test_streamed_call_without_a_name_is_an_error(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    delta = {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"}
    mock_server.script(Reply.error(200, body=sse(delta, completed())))
    with pytest.raises(StreamError, match="function call has no name"):
        await collect(llm)


# -- the HTTP layer: retries, deadline, keys -------------------------------------------------------


@pytest.mark.parametrize("api", ["complete", "stream"])
async def test_server_errors_and_rate_limits_are_retried(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, api: Api
) -> None:
    mock_server.script(
        Reply.error(500), Reply.error(429, headers={"retry-after": "0"}), Reply.text("ok")
    )
    response = await call(llm, api)
    assert response.text == "ok"
    assert len(mock_server.requests) == 3


async def test_retries_run_out(mock_server: MockLLMServer, llm: OpenAIResponsesCompatible) -> None:
    mock_server.default = Reply.error(503, "down")
    with pytest.raises(ProviderError, match="down") as caught:
        await llm.complete(REQUEST)
    assert caught.value.status == 503
    assert caught.value.attempts == 3


async def test_a_rejected_key_is_not_retried_and_never_shown(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.error(401, "bad key"))
    async with OpenAIResponsesCompatible(KEY, "m", mock_server.url, retry_policy=FAST) as llm:
        with pytest.raises(AuthenticationError) as caught:
            await llm.complete(REQUEST)
        assert KEY not in repr(llm)
    assert KEY not in str(caught.value)
    assert len(mock_server.requests) == 1


async def test_slow_drip_ends_at_the_deadline(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text("drip", drip=0.05))
    with pytest.raises(ProviderTimeoutError):
        await collect(llm, LLMRequest(REQUEST.messages, timeout=0.3))


async def test_streams_give_their_connection_back(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.default = Reply.text("ok", chunks=4)
    ports = set()
    for api in ("stream", "complete", "stream"):
        await call(llm, api)  # type: ignore[arg-type]
        (idle,) = [
            c
            for c in psutil.Process().net_connections(kind="tcp")
            if c.raddr and c.raddr.port == mock_server.port and c.status == psutil.CONN_ESTABLISHED
        ]
        ports.add(idle.laddr.port)
    assert len(ports) == 1


def test_provider_json_builds_responses_interfaces(tmp_path: Path) -> None:
    path = tmp_path / "provider.json"
    entry = {"model_name": "gpt-5", "api_keys": [KEY], "base_url": "http://127.0.0.1:9/v1"}
    path.write_text(json.dumps({"openai": [{**entry, "timeout": 30, "store": False}]}))
    loaded = OpenAIResponsesCompatible.load_from_json_file(path)
    llm = loaded["openai"]["gpt-5"]
    assert isinstance(llm, OpenAIResponsesCompatible)
    assert llm.base_url == "http://127.0.0.1:9/v1"
    assert llm.default_params == {"store": False}
    env = {"OPENAI_API_KEY": KEY, "OPENAI_MODEL": "gpt-5"}
    assert isinstance(OpenAIResponsesCompatible.from_env(env), OpenAIResponsesCompatible)


# -- the decorators on this provider ---------------------------------------------------------------


class City(BaseModel):
    name: str
    population: int


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


async def test_typed_llm_function(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible
) -> None:
    mock_server.script(Reply.text('{"name": "Oslo", "population": 700000}', chunks=3))

    @llm_function(llm)
    async def biggest(country: str) -> City:
        """Name the biggest city of the country."""

    with anyio.fail_after(GUARD):
        city = await biggest("Norway")
    assert city == City(name="Oslo", population=700000)
    body = mock_server.requests[0].json
    assert body["instructions"].startswith("Name the biggest city of the country.")
    assert body["text"]["format"]["type"] == "json_schema"
    assert set(body["text"]["format"]["schema"]["properties"]) == {"name", "population"}
    assert "Norway" in body["input"][0]["content"][0]["text"]


@pytest.mark.parametrize("stream", [False, True])
async def test_llm_chat_tool_turn(
    mock_server: MockLLMServer, llm: OpenAIResponsesCompatible, stream: bool
) -> None:
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="c1"),
            ToolCallSpec("weather", {"city": "Rome"}, id="c2"),
            text="Let me check.",
            reasoning="two cities",
            chunks=2,
        ),
        Reply.text("Sunny in both.", chunks=2),
    )

    @llm_chat(llm, toolkit=[weather], stream=stream)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    with anyio.fail_after(GUARD):
        outputs = [item async for item in agent("weather?", history=[])]
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
    assert final[2]["reasoning_details"][0]["id"] == "rs_mock1"
    assert [m["content"] for m in final[3:5]] == ["sunny in Oslo", "sunny in Rome"]
    first, second = (r.json for r in mock_server.requests)
    assert [t["name"] for t in first["tools"]] == ["weather"]
    assert ("stream" in first) is stream
    kinds = [(i["type"], i.get("id") or i.get("call_id")) for i in second["input"]]
    assert kinds == [
        ("message", None),
        ("reasoning", "rs_mock1"),
        ("message", "msg_mock1"),
        ("function_call", "fc_mock1_0"),
        ("function_call", "fc_mock1_1"),
        ("function_call_output", "c1"),
        ("function_call_output", "c2"),
    ]
    assert second["input"][-1]["output"] == "sunny in Rome"
