"""``@llm_chat`` at the wire: yields and histories in every mode, capabilities, parameters."""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.exceptions import DecoratorError, InvalidHistoryError
from simplellmfunc.hooks import EventYield, LLMChunkArriveEvent, ReactEndEvent, ResponseYield
from simplellmfunc.providers import (
    Capabilities,
    FinishEvent,
    LLMRequest,
    LLMResponse,
    StreamEvent,
    TextDelta,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed


@pytest.fixture
def server(mock_server: MockLLMServer) -> MockLLMServer:
    return mock_server  # from conftest.py, like the leak check run around every test


@pytest.fixture
async def llm(server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", server.url) as model:
        yield model


async def collect(stream: Any) -> list[Any]:
    with anyio.fail_after(GUARD):
        async with aclosing(stream) as items:
            return [item async for item in items]


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


PREVIOUS = [
    {"role": "system", "content": "An old system prompt."},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]


def tool_turn_script(server: MockLLMServer, *, chunks: int = 1) -> None:
    server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="c1"),
            ToolCallSpec("weather", {"city": "Rome"}, id="c2"),
            text="Let me check.",
            chunks=chunks,
        ),
        Reply.text("Sunny in both.", chunks=chunks),
    )


EXPECTED_TAIL = [
    {"role": "user", "content": "weather?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Rome"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "sunny in Oslo"},
    {"role": "tool", "tool_call_id": "c2", "content": "sunny in Rome"},
    {"role": "assistant", "content": "Sunny in both."},
]


async def test_non_stream_yields_each_reply_and_the_full_history(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    tool_turn_script(server)
    history = copy.deepcopy(PREVIOUS)

    @llm_chat(llm, toolkit=[weather])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    outputs = await collect(agent("weather?", history=history))
    assert history == PREVIOUS  # the caller's list is untouched
    assert [text for text, _ in outputs] == ["Let me check.", "Sunny in both."]
    final = outputs[-1][1]
    assert final[0] == {"role": "system", "content": "You report the weather."}
    assert final[1:3] == PREVIOUS[1:]
    assert final[3:] == EXPECTED_TAIL
    history_from_dicts(final)
    sent = server.requests[0].json["messages"]
    assert sent == [
        {"role": "system", "content": "You report the weather."},
        *PREVIOUS[1:],
        {"role": "user", "content": "weather?"},
    ]


async def test_stream_yields_deltas_and_the_full_history_last(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    tool_turn_script(server, chunks=3)

    @llm_chat(llm, toolkit=[weather], stream=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    outputs = await collect(agent("weather?", history=PREVIOUS))
    texts = [text for text, _ in outputs]
    assert "".join(texts) == "Let me check.Sunny in both."
    assert len([t for t in texts if t]) == 6
    assert texts[-1] == ""
    final = outputs[-1][1]
    assert final[3:] == EXPECTED_TAIL
    history_from_dicts(final)
    assert all(server.requests[n].json["stream"] is True for n in range(2))
    # While the answer streams, the history is the one the model was given.
    during = next(h for t, h in outputs if t == "Sunny")
    assert during[-1] == EXPECTED_TAIL[-2]


async def test_returned_history_is_valid_for_the_next_call(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    tool_turn_script(server)
    server.script(Reply.text("Still sunny."))

    @llm_chat(llm, toolkit=[weather])
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    first = await collect(agent("weather?", history=[]))
    second = await collect(agent("and now?", history=first[-1][1]))
    sent = server.requests[2].json["messages"]
    assert sent[1:-1] == first[-1][1][1:]
    assert sent[-1] == {"role": "user", "content": "and now?"}
    assert second[-1][1][-1] == {"role": "assistant", "content": "Still sunny."}


async def test_event_mode_final_messages(server: MockLLMServer, llm: OpenAICompatible) -> None:
    tool_turn_script(server, chunks=2)

    @llm_chat(llm, toolkit=[weather], stream=True, enable_event=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    items = await collect(agent("weather?", history=[]))
    response = items[-1]
    assert isinstance(response, ResponseYield)
    assert response.response == "Sunny in both."
    assert response.messages[1:] == EXPECTED_TAIL
    end = items[-2].event
    assert isinstance(end, ReactEndEvent)
    assert list(end.final_messages) == response.messages
    assert end.final_response == "Sunny in both."


@pytest.mark.parametrize("stream", [False, True])
async def test_raw_mode_yields_provider_objects(
    server: MockLLMServer, llm: OpenAICompatible, stream: bool
) -> None:
    tool_turn_script(server, chunks=2)

    @llm_chat(llm, toolkit=[weather], stream=stream, return_mode="raw")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    outputs = await collect(agent("weather?", history=[]))
    raw = [item for item, _ in outputs[:-1]]
    if stream:
        assert any(isinstance(r, TextDelta) for r in raw)
        finishes = [r for r in raw if isinstance(r, FinishEvent)]
        assert [f.response.text for f in finishes] == ["Let me check.", "Sunny in both."]
    else:
        assert all(isinstance(r, LLMResponse) for r in raw)
        assert [r.text for r in raw] == ["Let me check.", "Sunny in both."]
    assert outputs[-1][1][1:] == EXPECTED_TAIL


async def test_chat_history_parameter_and_extra_parameters(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("Bonjour"))

    @llm_chat(llm, temperature=0.5, tool_timeout=3)
    async def translate(text: str, language: str, chat_history: list[dict[str, Any]]) -> None:
        """Translate into {lang_name}."""

    outputs = await collect(
        translate("hello", "fr", chat_history=[], _template_params={"lang_name": "French"})
    )
    body = server.requests[0].json
    assert body["temperature"] == 0.5
    assert "tool_timeout" not in body
    assert body["messages"] == [
        {"role": "system", "content": "Translate into French."},
        {"role": "user", "content": "text (str): hello\nlanguage (str): fr\n"},
    ]
    assert outputs[-1][0] == "Bonjour"


async def test_without_a_docstring_the_history_system_prompt_stays(
    server: MockLLMServer, llm: OpenAICompatible
) -> None:
    server.script(Reply.text("ok"))

    @llm_chat(llm)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        pass

    outputs = await collect(agent("go", history=PREVIOUS))
    assert server.requests[0].json["messages"][0] == PREVIOUS[0]
    assert outputs[-1][1][0] == PREVIOUS[0]


async def test_bad_definitions_and_histories(llm: OpenAICompatible) -> None:
    with pytest.raises(DecoratorError):

        @llm_chat(llm)
        async def no_history(message: str) -> None:
            """Agent."""

    @llm_chat(llm)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Agent."""

    dangling = [
        {"role": "assistant", "content": None, "tool_calls": EXPECTED_TAIL[1]["tool_calls"]}
    ]
    with pytest.raises(InvalidHistoryError):
        await collect(agent("go", history=dangling))
    with pytest.raises(DecoratorError):
        await collect(agent("go", history="not a list"))


async def test_llama_cpp_like_server(server: MockLLMServer) -> None:
    caps = Capabilities(
        streaming_with_tools=False, null_assistant_content=False, stream_usage=False
    )
    shape: dict[str, Any] = {"delta_shape": "repeat_id_name", "usage": None, "chunks": 3}
    server.script(
        Reply.tool_calls(ToolCallSpec("weather", {"city": "Oslo"}, id="call_0"), **shape),
        Reply.tool_calls(ToolCallSpec("weather", {"city": "Rome"}, id="call_0"), **shape),
        Reply.text("Sunny in both.", **shape),
    )
    async with OpenAICompatible(None, "smol", server.url, capabilities=caps) as llm:

        @llm_chat(llm, toolkit=[weather], stream=True, max_tool_calls=2)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You report the weather."""

        outputs = await collect(agent("weather?", history=[]))
    bodies = [r.json for r in server.requests]
    # With tools the calls fall back to complete(); the final call (no tools) streams.
    assert ["stream" in b for b in bodies] == [False, False, True]
    assert all("stream_options" not in b for b in bodies)
    for body in bodies:
        assert all(m.get("content", "") is not None for m in body["messages"])
    assert "".join(text for text, _ in outputs) == "Sunny in both."
    final = outputs[-1][1]
    history_from_dicts(final)
    ids = [m["tool_call_id"] for m in final if m["role"] == "tool"]
    assert len(set(ids)) == 2  # the reused call_0 was renamed
    # max_tool_calls=2: the model is told its step budget runs low (seed 001 §3.4).
    assert bodies[1]["messages"][-1]["content"] == (
        "sunny in Oslo\n\n[Step budget] 1 tool round left; then you must give your final answer."
    )


class _CountingLLM(OpenAICompatible):
    """The real provider, counting the text deltas it has handed out so far."""

    produced = 0

    async def stream(self, request: LLMRequest) -> AsyncGenerator[StreamEvent, None]:
        async for event in super().stream(request):
            if isinstance(event, TextDelta):
                self.produced += 1
            yield event


@pytest.mark.parametrize("enable_event", [False, True])
async def test_first_text_reaches_the_consumer_before_the_rest_of_a_buffered_reply(
    server: MockLLMServer, enable_event: bool
) -> None:
    # The mock server writes the whole reply at once: every chunk is buffered when the first
    # is read. The consumer still gets the first text before the run reads the second.
    server.script(Reply.text("one two three four five six seven eight", chunks=8))
    async with _CountingLLM("sk-test-123456789", "mock-model", server.url) as llm:

        @llm_chat(llm, stream=True, enable_event=enable_event)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You count."""

        produced_when_seen: list[int] = []
        with anyio.fail_after(GUARD):
            async with aclosing(agent("count", history=[])) as items:
                async for item in items:
                    if isinstance(item, EventYield):
                        text = (
                            item.event.text if isinstance(item.event, LLMChunkArriveEvent) else ""
                        )
                    else:
                        text = item[0] if isinstance(item, tuple) else ""
                    if text:
                        produced_when_seen.append(llm.produced)
    assert len(produced_when_seen) == 8
    assert produced_when_seen[0] == 1
