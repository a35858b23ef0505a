"""Agent memory in real runs: MemoryHook injection and auto-save, against the mock LLM server.

``@llm_chat`` has no parameter for extra run hooks yet, so these runs drive the engine
(``Run``) directly with the same Invocation a decorator would build.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, tool
from simplellmfunc._events import EventOrigin
from simplellmfunc._transcript import Transcript
from simplellmfunc.engine import Emitter, Invocation, Run, RunResult
from simplellmfunc.runtime import (
    InMemoryStore,
    KeyValueExtraction,
    LLMSummary,
    MemoryHook,
    ScopedStore,
    Step,
    StepTriple,
    render_memory,
    strip_memory,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
SYSTEM = "You are a weather bot."


@tool
async def lookup(city: str) -> str:
    """Weather facts for a city."""
    return f"temperature = 21\ncity = {city}"


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible("sk-test-123456789", "mock-model", mock_server.url) as model:
        yield model


@pytest.fixture
def memory() -> ScopedStore:
    return InMemoryStore(clock=lambda: 5000.0).scope("weather-bot", "alice")


async def run(
    llm: OpenAICompatible, hook: MemoryHook, history: list[dict[str, Any]], call_id: str
) -> RunResult:
    invocation = Invocation(llm, system_prompt=SYSTEM, tools=(lookup,), hooks=(hook,))
    transcript = Transcript(list(history_from_dicts(history)))
    emitter = Emitter(None, EventOrigin(agent_call_id=call_id), wants_events=False)
    with anyio.fail_after(GUARD):
        return await Run(invocation, transcript, emitter).result()


def system_of(request: Any) -> str:
    first = request.json["messages"][0]
    assert first["role"] == "system"
    return str(first["content"])


async def test_memory_is_injected_and_auto_saved(
    mock_server: MockLLMServer, llm: OpenAICompatible, memory: ScopedStore
) -> None:
    await memory.set("user.name", "Alice")
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("lookup", {"city": "Oslo"}, id="c1"), text="Checking."),
        Reply.text("It is 21 degrees in Oslo."),
    )
    hook = MemoryHook(memory, recent=10, auto_save=[StepTriple(), KeyValueExtraction()])
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Oslo?"}]
    result = await run(llm, hook, history, "run1")
    assert result.text == "It is 21 degrees in Oslo."

    first, second = (system_of(r) for r in mock_server.requests)
    assert first.startswith(SYSTEM)
    assert "## Agent Memory" in first
    assert "- [user.name] Alice (just now)" in first
    assert "temperature" not in first
    # After the batch, the saved step and facts are in the next call's memory section.
    assert '[step.run1.1.0] [lookup({"city": "Oslo"})] temperature = 21 city = Oslo' in second
    assert "- [temperature] 21" in second
    assert second.count("## Agent Memory") == 1

    assert sorted(await memory.keys()) == [
        "city",
        "step.run1.1.0",
        "temperature",
        "turn.run1",
        "user.name",
    ]
    turn = await memory.get("turn.run1")
    assert turn is not None
    assert turn.value == "user: Oslo? | answer: It is 21 degrees in Oslo."
    # The returned history carries exactly one memory section, and it is valid history.
    final_system = result.messages[0]
    assert final_system.role == "system"
    assert final_system.content.count("## Agent Memory") == 1


async def test_a_fed_back_history_keeps_one_memory_section(
    mock_server: MockLLMServer, llm: OpenAICompatible, memory: ScopedStore
) -> None:
    await memory.set("fact", "The user likes rain.")
    hook = MemoryHook(memory, save_turns=False)
    mock_server.script(Reply.text("Noted."), Reply.text("Rain, you said."))
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "hi"}]
    first = await run(llm, hook, history, "t1")
    again = [
        {"role": m.role, "content": m.content}
        for m in first.messages
        if m.role in ("system", "user", "assistant")
    ]
    again.append({"role": "user", "content": "what do I like?"})
    await run(llm, hook, again, "t2")
    sent = system_of(mock_server.requests[1])
    assert sent.count("## Agent Memory") == 1
    assert "[fact] The user likes rain." in sent
    assert await memory.keys() == ["fact"]  # save_turns=False and no tool batch


async def test_no_system_message_gets_one_with_the_prompt(
    mock_server: MockLLMServer, llm: OpenAICompatible, memory: ScopedStore
) -> None:
    await memory.set("k", "v")
    mock_server.script(Reply.text("ok"))
    await run(llm, MemoryHook(memory, auto_save=()), [{"role": "user", "content": "hi"}], "x")
    sent = system_of(mock_server.requests[0])
    assert sent.startswith(SYSTEM)
    assert "- [k] v" in sent
    assert await memory.keys() == ["k"]  # auto_save=() saves nothing


async def test_llm_summary_strategy(mock_server: MockLLMServer, llm: OpenAICompatible) -> None:
    mock_server.script(Reply.text("The user's name is Alice."), Reply.text("NONE"))
    summary = LLMSummary(llm)
    step = Step("turn", "r1", 1, "remember: my name is Alice", answer="Noted, Alice.")
    assert await summary.extract(step) == [("summary.r1.1", "The user's name is Alice.")]
    assert await summary.extract(Step("turn", "r2", 1, "hi", answer="hello")) == []
    sent = mock_server.requests[0].json["messages"]
    assert sent[0]["role"] == "system"
    assert "User: remember: my name is Alice" in sent[1]["content"]


async def test_key_value_extraction_reads_turns_too() -> None:
    step = Step("turn", "r", 1, "name = Alice\nplease remember", answer="city=Paris")
    assert await KeyValueExtraction().extract(step) == [("name", "Alice"), ("city", "Paris")]
    custom = KeyValueExtraction(r"(\w+) is (\w+)")
    found = await custom.extract(Step("turn", "r", 1, "my name is Alice", answer=""))
    assert found == [("name", "Alice")]


def test_render_and_strip_memory() -> None:
    from simplellmfunc.runtime import StoreItem

    items = [StoreItem("a", "line one\nline two", 100.0), StoreItem("b", {"x": 1}, 0.0)]
    section = render_memory(items, now=3700.0)
    assert section.splitlines()[2:] == [
        "- [a] line one line two (1h ago)",
        '- [b] {"x": 1} (1h ago)',
    ]
    text = f"Base prompt.\n\n{section}\n\n## Tool guidance\nuse tools"
    assert strip_memory(text) == "Base prompt.\n\n## Tool guidance\nuse tools"
    assert strip_memory(f"Base.\n\n{section}") == "Base."
    assert strip_memory(section) == ""
    assert render_memory([], now=0.0) == ""
