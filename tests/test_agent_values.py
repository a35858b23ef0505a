"""Agents are values: ``@llm_chat`` gives a :class:`ChatAgent`, ``@llm_function`` an
:class:`LLMFunction`; ``run()`` is the one way to an agent's events and result, ``stream()``
yields validated partial values; methods of a class work; strict mypy needs no cast."""

from __future__ import annotations

import inspect
import itertools
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from simplellmfunc import OpenAICompatible, llm_chat, llm_function
from simplellmfunc.decorators import AgentTool, ChatAgent, LLMFunction
from simplellmfunc.engine import RunResult
from simplellmfunc.exceptions import OutputParseError, UserError
from simplellmfunc.hooks import EventYield, LLMChunkArriveEvent, ReactEndEvent
from simplellmfunc.runtime import GroupChat
from simplellmfunc.serving import ServedAgent
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


class Person(BaseModel):
    name: str
    tags: list[str] = []


async def test_decorators_return_the_public_classes(llm: OpenAICompatible) -> None:
    @llm_chat(llm, stream=True)
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """Help the user.

        More text."""

    @llm_function(llm)
    async def extract(text: str) -> Person:
        """Extract the person."""
        raise NotImplementedError

    assert isinstance(helper, ChatAgent)
    assert isinstance(extract, LLMFunction)
    assert helper.__name__ == "helper"
    assert helper.name == "helper"
    assert helper.description == "Help the user."
    assert helper.__doc__.startswith("Help")
    assert list(inspect.signature(helper).parameters) == ["message", "history"]
    assert inspect.signature(extract) == inspect.signature(extract.__wrapped__)
    assert helper.options is not None
    assert extract.options == helper.options
    assert isinstance(helper.as_tool(), AgentTool)
    helper.__name__ = "renamed"  # what SimpleLLMFunc code does to name agents made in a loop
    assert helper.name == "renamed"
    assert helper.as_tool().name == "renamed"
    # Not an agent: refused by type, not by a missing attribute.
    with pytest.raises(UserError, match="not an @llm_chat agent"):
        AgentTool(extract)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="not an @llm_chat agent"):
        GroupChat([extract])  # type: ignore[list-item]
    with pytest.raises(UserError, match="neither an @llm_chat agent"):
        ServedAgent(extract)  # type: ignore[arg-type]


async def test_run_gives_the_events_then_the_result(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("Hello there.", chunks=3))

    @llm_chat(llm, stream=True)
    async def helper(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """Help the user."""

    run = await helper.run("hi")  # no history: an empty one
    items = []
    with anyio.fail_after(GUARD):
        async for item in run:
            items.append(item)
    result = items[-1]
    assert isinstance(result, RunResult)
    assert result.text == "Hello there."
    events = [i.event for i in items[:-1] if isinstance(i, EventYield)]
    assert len(events) == len(items) - 1
    assert sum(isinstance(e, LLMChunkArriveEvent) for e in events) == 3
    assert isinstance(events[-1], ReactEndEvent)
    assert [m.role for m in result.messages] == ["system", "user", "assistant"]


async def test_stream_yields_growing_partial_values_then_the_final_one(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    reply = json.dumps({"name": "Ada Lovelace", "tags": ["math", "poetry", "engines"]})
    mock_server.script(Reply.text(reply, chunks=12))

    @llm_function(llm)
    async def extract(text: str) -> Person:
        """Extract the person."""
        raise NotImplementedError

    values: list[Person] = []
    with anyio.fail_after(GUARD):
        async for value in extract.stream("Ada wrote poetry"):
            values.append(value)
    assert all(isinstance(v, Person) for v in values)
    assert values[-1] == Person(name="Ada Lovelace", tags=["math", "poetry", "engines"])
    partial = values[:-1]
    assert len(partial) >= 3  # the value grew while the reply streamed
    assert all(v != w for v, w in itertools.pairwise(partial))
    names = [v.name for v in partial]
    assert any(0 < len(n) < len("Ada Lovelace") for n in names)  # a string cut short
    assert all("Ada Lovelace".startswith(n) for n in names)
    assert mock_server.requests[0].json["stream"] is True


async def test_stream_of_a_list_and_of_a_reply_that_never_parses(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(
        Reply.text('{"result": ["bolt", "nut", "washer"]}', chunks=8),
        Reply.text("not json", chunks=2),
        Reply.text("still not", chunks=2),
    )

    @llm_function(llm)
    async def parts(text: str) -> list[str]:
        """List the parts."""
        raise NotImplementedError

    with anyio.fail_after(GUARD):
        values = [v async for v in parts.stream("a bolt, a nut, a washer")]
    assert values[-1] == ["bolt", "nut", "washer"]
    assert all(values[-1][: len(v)] == [*v[:-1], values[-1][len(v) - 1]] for v in values if v)

    @llm_function(llm, retries=1)
    async def number(text: str) -> int:
        """A number."""
        raise NotImplementedError

    seen: list[int] = []

    async def consume() -> None:
        async for n in number.stream("x"):
            seen.append(n)

    with pytest.raises(OutputParseError), anyio.fail_after(GUARD):
        await consume()
    assert seen == []


async def test_methods_of_a_class(mock_server: MockLLMServer, llm: OpenAICompatible) -> None:
    mock_server.script(
        Reply.text("Bonjour."),
        Reply.text('{"result": 3}'),
        Reply.tool_calls(ToolCallSpec("greeter", {"task": "greet"})),
        Reply.text("Bonjour."),
        Reply.text("Done."),
    )

    class Bot:
        def __init__(self, language: str) -> None:
            self.language = language

        @llm_chat(llm)
        async def chat(self, message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Answer in French."""

        @llm_function(llm)
        async def count(self, text: str) -> int:
            """Count the words."""
            raise NotImplementedError

    bot = Bot("fr")
    assert isinstance(Bot.chat, ChatAgent)
    assert isinstance(bot.chat, ChatAgent)
    assert list(inspect.signature(bot.chat).parameters) == ["message", "history"]
    with anyio.fail_after(GUARD):
        async for text, _history in bot.chat("Hello", history=[]):
            assert text == "Bonjour."
        assert await bot.count("one two three") == 3
        # the instance is bound, not sent: a lone message goes as itself
        assert mock_server.requests[0].json["messages"][1] == {"role": "user", "content": "Hello"}
        assert "self" not in mock_server.requests[1].json["messages"][1]["content"]

        @llm_chat(llm, toolkit=[bot.chat.as_tool("greeter")])
        async def boss(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """Delegate."""

        history: list[dict[str, Any]] = []
        async for _text, history in boss("Greet", history=[]):  # noqa: B007 - the last one
            pass
    assert history[-1]["content"] == "Done."
    assert history[-2]["content"] == "Bonjour."  # the bound agent answered as a tool


def test_strict_mypy_needs_no_cast_on_a_user_file(tmp_path: Path) -> None:
    """A user's file using ``agent.resume``, ``agent.as_tool()``, ``agent.run`` and
    ``LLMFunction.stream`` type-checks under ``mypy --strict`` without a cast or an ignore
    (the file is also in ``make typecheck``, which keeps the cache warm)."""
    user_file = ROOT / "tests" / "typecheck" / "agent_user.py"
    text = user_file.read_text()
    assert "cast(" not in text
    assert "type: ignore" not in text
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", str(user_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
