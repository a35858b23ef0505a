"""The JSON tool protocol at the wire: schema-constrained steps for small local models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import EngineOptions, OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.events import (
    EventYield,
    LLMCallEndEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
)
from simplellmfunc.providers import Capabilities
from simplellmfunc.testing import MockLLMServer, Reply
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
JSON = EngineOptions(tool_protocol="json")
CITIES: list[str] = []


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    CITIES.clear()
    caps = Capabilities(native_tools=False, json_schema=True)
    async with OpenAICompatible(None, "smol", mock_server.url, capabilities=caps) as model:
        yield model


@tool
async def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name.
    """
    CITIES.append(city)
    return f"{city}: 14°C, rain showers"


def step(**fields: Any) -> Reply:
    return Reply.text(json.dumps(fields))


def schema_of(server: MockLLMServer, n: int) -> dict[str, Any]:
    fmt = server.requests[n].json["response_format"]
    assert fmt["type"] == "json_schema"
    schema: dict[str, Any] = fmt["json_schema"]["schema"]
    return schema


async def test_steps_are_schema_constrained_and_a_repeat_forces_the_answer(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    call = {"action": "get_weather", "action_input": {"city": "Paris"}}
    mock_server.script(
        step(**call),
        step(**call),  # small models repeat the call after seeing its result
        step(action="final_answer", answer="Paris: 14°C with rain showers."),
    )

    @llm_chat(llm, toolkit=[get_weather], enable_event=True, options=JSON)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions."""

    with anyio.fail_after(GUARD):
        async with aclosing(agent("Weather in Paris?", history=[])) as items:
            outputs = [item async for item in items]
    end = [o.event for o in outputs if isinstance(o, EventYield)][-1]
    assert isinstance(end, ReactEndEvent)
    assert end.final_response == "Paris: 14°C with rain showers."
    assert end.terminated_by == "answer"
    assert CITIES == ["Paris"]  # the repeated call was not run again

    first = mock_server.requests[0].json
    assert "tools" not in first
    assert '"action": "final_answer"' in first["messages"][0]["content"]
    # The answer's placeholder says what goes there (with a bare ``...`` Gemma 3 270M answered
    # "Paris" to this question after the tool had returned the weather).
    assert "answer to the user, built from the tool results" in first["messages"][0]["content"]
    branches = schema_of(mock_server, 0)["oneOf"]
    assert [b["properties"]["action"] for b in branches] == [
        {"const": "get_weather"},
        {"const": "final_answer"},
    ]
    assert branches[0]["properties"]["action_input"]["properties"]["city"]["type"] == "string"

    second = mock_server.requests[1].json["messages"]
    assert json.loads(second[-2]["content"]) == call  # the call as the model wrote it
    assert second[-1]["role"] == "tool"  # the observation in the role the model reads
    assert second[-1]["content"] == "Paris: 14°C, rain showers"

    third = mock_server.requests[2].json
    assert schema_of(mock_server, 2)["properties"]["action"] == {"const": "final_answer"}
    # The answer step is sent what the model saw before it repeated itself.
    assert third["messages"] == mock_server.requests[1].json["messages"]
    history = history_from_dicts(end.final_messages)  # the repetition is kept, answered
    assert "Not run again" in history[-2].content  # type: ignore[union-attr]
    assert history[-1].content == "Paris: 14°C with rain showers."  # type: ignore[union-attr]


async def test_a_malformed_step_is_sent_back(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("I think it rains."), step(action="final_answer", answer="Rain."))

    @llm_chat(llm, toolkit=[get_weather], options=JSON)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions."""

    with anyio.fail_after(GUARD):
        outputs = [out async for out in agent("Weather?", history=[])]
    assert outputs[-1][0] == "Rain."
    feedback = mock_server.requests[1].json["messages"][-1]
    assert feedback["role"] == "user"
    assert "one JSON object" in feedback["content"]


class Forecast(BaseModel):
    city: str
    celsius: int


async def test_llm_function_answers_in_its_return_type(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        step(action="get_weather", action_input={"city": "Oslo"}),
        step(action="final_answer", answer={"city": "Oslo", "celsius": 14}),
    )

    @llm_function(llm, toolkit=[get_weather], tool_protocol="json")
    async def forecast(question: str) -> Forecast:
        """Answer with the forecast."""

    with anyio.fail_after(GUARD):
        assert await forecast("How warm is Oslo?") == Forecast(city="Oslo", celsius=14)
    answer = schema_of(mock_server, 0)["oneOf"][-1]["properties"]["answer"]
    assert answer["properties"]["celsius"]["type"] == "integer"  # the return type's schema


async def test_streamed_text_is_the_answer_not_the_json_steps(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.text(json.dumps({"action": "get_weather", "action_input": {"city": "Oslo"}})),
        Reply.text(json.dumps({"action": "final_answer", "answer": "Snow in Oslo."}), chunks=4),
    )

    @llm_chat(llm, toolkit=[get_weather], stream=True, options=JSON)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions."""

    with anyio.fail_after(GUARD):
        outputs = [out async for out in agent("Weather in Oslo?", history=[])]
    assert "".join(text for text, _ in outputs) == "Snow in Oslo."
    assert outputs[-1][1][-1] == {"role": "assistant", "content": "Snow in Oslo."}


async def test_streamed_events_carry_the_answer_not_the_json_steps(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """Front ends draw chunk events as the reply: under the protocol they must not see its JSON."""
    mock_server.script(
        Reply.text(json.dumps({"action": "get_weather", "action_input": {"city": "Oslo"}})),
        Reply.text(json.dumps({"action": "final_answer", "answer": "Snow in Oslo."}), chunks=4),
    )

    @llm_chat(llm, toolkit=[get_weather], stream=True, enable_event=True, options=JSON)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions."""

    with anyio.fail_after(GUARD):
        events = [i.event async for i in agent("Weather in Oslo?", history=[])
                  if isinstance(i, EventYield)]  # fmt: skip
    chunks = [e for e in events if isinstance(e, LLMChunkArriveEvent)]
    # The answer streams as it arrives (more than one piece), and only the answer.
    assert len(chunks) > 1
    assert "".join(c.text for c in chunks) == chunks[-1].accumulated_text == "Snow in Oslo."
    kinds = [e.kind for e in events]
    assert kinds.index("tool_call_end") < kinds.index("llm_chunk_arrive")
    ends = [e for e in events if isinstance(e, LLMCallEndEvent)]
    assert [e.reply_text for e in ends] == ["", "Snow in Oslo."]  # what a front end shows
    assert json.loads(ends[0].response_text)["action"] == "get_weather"  # the raw reply stays
    assert CITIES == ["Oslo"]


async def test_a_capped_runs_answer_is_streamed_once(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """The last reply of a capped run is the answer even when it is not a valid step."""
    mock_server.script(
        Reply.text(json.dumps({"action": "get_weather", "action_input": {"city": "Oslo"}})),
        Reply.text("Snow in Oslo."),
    )
    options = EngineOptions(tool_protocol="json", max_tool_calls=1)

    @llm_chat(llm, toolkit=[get_weather], stream=True, enable_event=True, options=options)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer weather questions."""

    with anyio.fail_after(GUARD):
        events = [i.event async for i in agent("Weather in Oslo?", history=[])
                  if isinstance(i, EventYield)]  # fmt: skip
    chunks = [e.text for e in events if isinstance(e, LLMChunkArriveEvent)]
    assert chunks == ["Snow in Oslo."]
    end = next(e for e in events if isinstance(e, ReactEndEvent))
    assert end.final_response == "Snow in Oslo."
