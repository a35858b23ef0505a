"""The OpenAI-compatible endpoints as the official ``openai`` client sees them: a real uvicorn
server on loopback serving an agent backed by the mock LLM server.

Each test is one (or two related) of the expectations in the note's conformance table: what the
client's API promises must hold, and whatever the endpoint cannot honour is an OpenAI error,
never a silent 200."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import openai
import pytest
from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.engine import HistoryWindow
from simplellmfunc.providers import Capabilities
from simplellmfunc.serving import ServedAgent, create_app, running
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 20.0
KEY = "sk-test-123456789"
TOKEN = "serve-token-abcdef"

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@asynccontextmanager
async def serving(
    mock_server: MockLLMServer,
    *,
    vision: bool = True,
    served: dict[str, Any] | None = None,
    **agent: Any,
) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official client, talking to a served ``helper`` agent over loopback HTTP."""
    caps = Capabilities(vision=vision)
    async with OpenAICompatible(KEY, "mock-model", mock_server.url, capabilities=caps) as llm:

        async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You are a helper."""

        agent_fn = llm_chat(llm, stream=True, **agent)(helper)
        server = ServedAgent(agent_fn, **(served or {}))
        app = lambda url: create_app(server, url, token=TOKEN, a2a=False)  # noqa: E731
        async with running(app) as url:
            client = openai.AsyncOpenAI(api_key=TOKEN, base_url=f"{url}/v1", max_retries=0)
            try:
                with anyio.fail_after(GUARD):
                    yield client
            finally:
                await client.close()


USER = [{"role": "user", "content": "hi"}]


async def test_plain_chat(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.text("Hello there.", usage=(7, 3)))
    async with serving(mock_server) as client:
        reply = await client.chat.completions.create(model="helper", messages=USER)
    assert reply.choices[0].message.content == "Hello there."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 3)


async def test_stream_and_include_usage(mock_server: MockLLMServer) -> None:
    """Usage comes only when asked, in a last chunk with ``choices: []`` (as OpenAI sends it)."""
    mock_server.script(Reply.text("One two three.", chunks=3, usage=(5, 4)), Reply.text("Again."))
    async with serving(mock_server) as client:
        stream = await client.chat.completions.create(
            model="helper",
            messages=USER,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [c async for c in stream]
        plain = await client.chat.completions.create(model="helper", messages=USER, stream=True)
        plain_chunks = [c async for c in plain]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One two three."
    assert chunks[0].choices[0].delta.role == "assistant"
    last, finish = chunks[-1], chunks[-2]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (5, 4)
    assert finish.choices[0].finish_reason == "stop"
    assert finish.usage is None
    assert all(c.usage is None for c in plain_chunks)
    assert plain_chunks[-1].choices[0].finish_reason == "stop"


async def test_client_tool_round_trip(mock_server: MockLLMServer) -> None:
    """The agent calls the client's tool: ``tool_calls`` / ``finish_reason: "tool_calls"``;
    its own tool in the same batch runs on the server; the client's ``role: "tool"`` result
    continues the run (streamed too)."""
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("add", {"a": 2, "b": 3}, id="s1"),
            ToolCallSpec("get_weather", {"city": "Paris"}, id="c1"),
        ),
        Reply.text("5, and sunny in Paris."),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Oslo"}, id="c2"), chunks=2),
        Reply.text("Snow in Oslo.", chunks=2),
    )
    async with serving(mock_server, toolkit=[add]) as client:
        first = await client.chat.completions.create(
            model="helper", messages=USER, tools=[WEATHER_TOOL]
        )
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.tool_calls is not None
        (call,) = choice.message.tool_calls
        assert call.type == "function"
        assert (call.id, call.function.name) == ("c1", "get_weather")
        assert json.loads(call.function.arguments) == {"city": "Paris"}
        messages: list[Any] = [
            *USER,
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"},
        ]
        second = await client.chat.completions.create(
            model="helper", messages=messages, tools=[WEATHER_TOOL]
        )
        stream = await client.chat.completions.create(
            model="helper", messages=USER, tools=[WEATHER_TOOL], stream=True
        )
        chunks = [c async for c in stream]
        streamed = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
        calls = [d for deltas in streamed if deltas for d in deltas]
        back = [
            *USER,
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": calls[0].id,
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": calls[0].id, "content": "snow"},
        ]
        again = await client.chat.completions.create(
            model="helper", messages=back, stream=True, tools=[WEATHER_TOOL]
        )
        again_text = "".join([c.choices[0].delta.content or "" async for c in again if c.choices])
    assert second.choices[0].message.content == "5, and sunny in Paris."
    assert second.choices[0].finish_reason == "stop"
    # The second model call saw the server-side result, then the client's.
    sent = mock_server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[3] == {"role": "tool", "tool_call_id": "s1", "content": "5"}
    assert sent[4] == {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21 C"}
    offered = [t["function"]["name"] for t in mock_server.requests[0].json["tools"]]
    assert offered == ["add", "get_weather"]
    assert [(c.index, c.function.name if c.function else None) for c in calls] == [
        (0, "get_weather")
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    assert again_text == "Snow in Oslo."


async def test_client_tools_in_a_server_side_session(mock_server: MockLLMServer) -> None:
    """With ``X-Session-Id`` the session keeps the turn's whole history: the client's results
    continue it; a new message instead answers the pending call as cancelled."""
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("add", {"a": 2, "b": 3}, id="s1"),
            ToolCallSpec("get_weather", {"city": "Paris"}, id="c1"),
        ),
        Reply.text("5, and sunny."),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Rome"}, id="c2")),
        Reply.text("Fine."),
    )
    session = {"X-Session-Id": "alice"}
    async with serving(mock_server, toolkit=[add]) as client:
        first = await client.chat.completions.create(
            model="helper", messages=USER, tools=[WEATHER_TOOL], extra_headers=session
        )
        message = first.choices[0].message.model_dump(exclude_none=True)
        result = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
        second = await client.chat.completions.create(
            model="helper",
            messages=[*USER, message, result],
            tools=[WEATHER_TOOL],
            extra_headers=session,
        )
        third = await client.chat.completions.create(
            model="helper", messages=USER, tools=[WEATHER_TOOL], extra_headers=session
        )
        fourth = await client.chat.completions.create(
            model="helper",
            messages=[{"role": "user", "content": "never mind"}],
            extra_headers=session,
        )
    assert first.choices[0].finish_reason == "tool_calls"
    assert second.choices[0].message.content == "5, and sunny."
    sent = mock_server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert third.choices[0].finish_reason == "tool_calls"
    assert fourth.choices[0].message.content == "Fine."
    last = mock_server.requests[3].json["messages"]
    assert last[-2]["tool_call_id"] == "c2"
    assert last[-2]["content"].startswith("Cancelled")
    assert last[-1] == {"role": "user", "content": "never mind"}


async def test_tool_choice_and_refused_client_tools(mock_server: MockLLMServer) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Rome"})))
    async with serving(mock_server) as client:
        await client.chat.completions.create(
            model="helper", messages=USER, tools=[WEATHER_TOOL], tool_choice="required"
        )
        with pytest.raises(openai.BadRequestError) as named:
            await client.chat.completions.create(
                model="helper",
                messages=USER,
                tools=[WEATHER_TOOL],
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            )
    assert mock_server.requests[0].json["tool_choice"] == "required"
    assert named.value.param == "tool_choice"
    async with serving(mock_server, served={"client_tools": False}) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="helper", messages=USER, tools=[WEATHER_TOOL]
            )
    assert refused.value.param == "tools"
    assert refused.value.code == "tools_refused"
    assert len(mock_server.requests) == 1


class Weather(BaseModel):
    city: str
    celsius: int


async def test_parse_with_a_json_schema(mock_server: MockLLMServer) -> None:
    """``.parse()`` works: the schema goes to the model, a non-conforming answer is sent back
    once, and the answer the client gets matches the schema."""
    mock_server.script(
        Reply.text("Sure! It is 21 degrees in Paris."),
        Reply.text('{"city": "Paris", "celsius": 21}'),
        Reply.text('{"ok": true}'),
        Reply.text("Not JSON", chunks=2),
        Reply.text('{"streamed": 1}', chunks=3),
    )
    async with serving(mock_server) as client:
        parsed = await client.chat.completions.parse(
            model="helper", messages=USER, response_format=Weather
        )
        loose = await client.chat.completions.create(
            model="helper", messages=USER, response_format={"type": "json_object"}
        )
        stream = await client.chat.completions.create(
            model="helper", messages=USER, response_format={"type": "json_object"}, stream=True
        )
        # A shaped answer is checked before it is sent: the rejected reply never shows.
        streamed = "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
    assert parsed.choices[0].message.parsed == Weather(city="Paris", celsius=21)
    first = mock_server.requests[0].json
    assert first["response_format"]["type"] == "json_schema"
    assert first["response_format"]["json_schema"]["name"] == "Weather"
    assert "JSON schema" in first["messages"][0]["content"]
    repair = mock_server.requests[1].json["messages"][-1]
    assert repair["role"] == "user"
    assert "not valid JSON" in repair["content"]
    assert json.loads(loose.choices[0].message.content or "") == {"ok": True}
    assert json.loads(streamed) == {"streamed": 1}


async def test_n_above_one_is_refused(mock_server: MockLLMServer) -> None:
    async with serving(mock_server) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="helper", messages=USER, n=2)
    assert refused.value.param == "n"
    assert mock_server.requests == []


async def test_models_and_a_bad_model(mock_server: MockLLMServer) -> None:
    async with serving(mock_server) as client:
        with pytest.raises(openai.NotFoundError) as missing:
            await client.chat.completions.create(model="gpt-nope", messages=USER)
        listed = await client.models.list()
        one = await client.models.retrieve("helper")
        with pytest.raises(openai.NotFoundError) as unknown:
            await client.models.retrieve("gpt-nope")
    assert missing.value.code == "model_not_found"
    assert [m.id for m in listed.data] == ["helper"]
    assert (one.id, one.object) == ("helper", "model")
    assert unknown.value.code == "model_not_found"
    assert mock_server.requests == []


async def test_no_auth_and_error_shape(mock_server: MockLLMServer) -> None:
    async with serving(mock_server) as client:
        wrong = client.with_options(api_key="not-the-token")
        with pytest.raises(openai.AuthenticationError) as refused:
            await wrong.chat.completions.create(model="helper", messages=USER)
        with pytest.raises(openai.BadRequestError) as bad:
            await client.chat.completions.create(
                model="helper", messages=[{"role": "assistant", "content": "I start"}]
            )
        async with httpx.AsyncClient(base_url=str(client.base_url)) as http:
            auth = {"Authorization": f"Bearer {TOKEN}"}
            garbage = await http.post(
                "chat/completions",
                content=b"{not json",
                headers={**auth, "Content-Type": "application/json"},
            )
            odd = [
                await http.post("chat/completions", json=body, headers=auth)
                for body in (
                    {"messages": [1]},
                    {"messages": USER, "response_format": "json"},
                    {
                        "messages": USER,
                        "tools": [{"type": "function", "function": {"name": "a b"}}],
                    },
                    {"messages": USER, "tools": "x"},
                )
            ]
            responses = [
                await http.post("responses", json=body, headers=auth)
                for body in ({"input": [1]}, {"input": [{"role": "user", "content": [2]}]})
            ]
    assert refused.value.code == "invalid_api_key"
    assert isinstance(refused.value.body, dict)
    assert set(refused.value.body) == {"message", "type", "param", "code"}
    assert bad.value.param == "messages"
    for answer in [garbage, *odd, *responses]:
        assert answer.status_code == 400
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert mock_server.requests == []


async def test_images_passed_on_or_refused(mock_server: MockLLMServer) -> None:
    image = "data:image/png;base64,iVBORw0KGgo="
    messages: Any = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": image}},
            ],
        }
    ]
    mock_server.script(Reply.text("A tiny PNG."))
    async with serving(mock_server) as client:
        seen = await client.chat.completions.create(model="helper", messages=messages)
    async with serving(mock_server, vision=False) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(model="helper", messages=messages)
    assert seen.choices[0].message.content == "A tiny PNG."
    parts = mock_server.requests[0].json["messages"][-1]["content"]
    assert [p["type"] for p in parts] == ["text", "image_url"]
    assert parts[1]["image_url"]["url"] == image
    assert refused.value.code == "image_not_supported"
    assert len(mock_server.requests) == 1


async def test_a_long_history_drop_is_reported(mock_server: MockLLMServer) -> None:
    """A 500-message history with an agent that keeps 5 turns: the model sees the last 5 (and a
    note), and the response says how many messages it did not see."""
    history: list[Any] = []
    for n in range(250):
        history += [
            {"role": "user", "content": f"question {n}"},
            {"role": "assistant", "content": f"answer {n}"},
        ]
    messages = [*history[:-1]]  # 499 messages, ending with the user's
    mock_server.script(Reply.text("Noted."), Reply.text("Streamed.", chunks=2))
    window = HistoryWindow(keep_recent_turns=5)
    async with serving(mock_server, history_window=window) as client:
        raw = await client.chat.completions.with_raw_response.create(
            model="helper", messages=messages
        )
        reply = raw.parse()
        stream = await client.chat.completions.create(
            model="helper", messages=messages, stream=True
        )
        chunks = [c async for c in stream]
    sent = mock_server.requests[0].json["messages"]
    assert len(sent) == 1 + 1 + 9  # system, the note, the last 5 turns
    assert raw.headers["x-history-dropped"] == "490"
    assert reply.model_extra is not None
    assert reply.model_extra["history_dropped"] == 490
    assert chunks[-1].model_extra is not None
    assert chunks[-1].model_extra["history_dropped"] == 490


async def test_upstream_errors_are_typed_not_relayed(mock_server: MockLLMServer) -> None:
    secret = "internal-upstream-detail-7f3a"
    mock_server.script(Reply.error(400, f"bad request: {secret}", body=f"oops {secret}"))
    async with serving(mock_server) as client:
        with pytest.raises(openai.APIStatusError) as failed:
            await client.chat.completions.create(model="helper", messages=USER)
    assert failed.value.status_code == 502
    assert failed.value.code == "upstream_error"
    assert secret not in failed.value.response.text


async def test_responses_create_stream_and_previous_response_id(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.text("Hello from responses.", usage=(6, 4)),
        Reply.text("You said hi before.", chunks=3),
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Lima"}, id="r1")),
        Reply.text("Warm in Lima."),
    )
    async with serving(mock_server) as client:
        first = await client.responses.create(model="helper", input="hi")
        stream = await client.responses.create(
            model="helper",
            input="what did I say?",
            previous_response_id=first.id,
            stream=True,
        )
        events = [e async for e in stream]
        tool = {"type": "function", **WEATHER_TOOL["function"]}
        called_stream = await client.responses.create(
            model="helper", input="weather?", tools=[tool], stream=True
        )
        called_events = [e async for e in called_stream]
        called = called_events[-1].response  # response.completed
        (call,) = [o for o in called.output if o.type == "function_call"]
        done = await client.responses.create(
            model="helper",
            previous_response_id=called.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "warm"}],
            tools=[tool],
        )
        with pytest.raises(openai.NotFoundError):
            await client.responses.create(
                model="helper", input="x", previous_response_id="resp_unknown"
            )
    assert first.output_text == "Hello from responses."
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (6, 4)
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert kinds.count("response.output_text.delta") == 3
    assert "response.output_text.done" in kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == "You said hi before."
    # previous_response_id: the second turn saw the first one.
    sent = mock_server.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[2]["content"] == "Hello from responses."
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Lima"})
    added = [e for e in called_events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["function_call"]
    assert done.output_text == "Warm in Lima."
    assert mock_server.requests[3].json["messages"][-1]["content"] == "warm"
