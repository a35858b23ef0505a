"""SelfReference bound to ``@llm_chat`` turns, against the wire-level mock LLM server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.builtin import SelfReference
from simplellmfunc.builtin.selfref._hook import CONTRACT_HEADING
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


@pytest.fixture
async def env() -> AsyncIterator[tuple[MockLLMServer, OpenAICompatible]]:
    async with MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)
        try:
            yield server, llm
        finally:
            await llm.aclose()


async def _turn(agent: Any, message: str, history: Any = None) -> tuple[str, list[dict[str, Any]]]:
    items = [item async for item in agent(message, history=history)]
    text, final = items[-1]
    return text, final


def _messages(server: MockLLMServer, n: int) -> list[dict[str, Any]]:
    body = server.requests[n].json
    assert isinstance(body, dict)
    return list(body["messages"])


async def test_contract_once_and_history_stored(env: Any) -> None:
    server, llm = env
    sr = SelfReference()

    @llm_chat(llm, self_reference=sr, self_reference_key="agent_main")
    async def agent(message: str, history: Any = None) -> None:
        """You are a helpful assistant."""

    server.script(Reply.text("hello!"), Reply.text("again"))
    text, history = await _turn(agent, "hi")
    assert text == "hello!"
    system = _messages(server, 0)[0]["content"]
    assert system.startswith("You are a helpful assistant.")
    assert system.count(CONTRACT_HEADING) == 1
    assert 'memory["agent_main"]' in system
    stored = sr.get_history("agent_main")
    assert stored[0] == {"role": "system", "content": "You are a helpful assistant."}
    assert stored[1:] == history[1:]
    assert [m["role"] for m in stored] == ["system", "user", "assistant"]
    # Second turn without history: memory is the conversation; the contract is not doubled.
    _, history2 = await _turn(agent, "and now?")
    sent = _messages(server, 1)
    assert [m["content"] for m in sent[1:]] == ["hi", "hello!", "and now?"]
    assert sent[0]["content"].count(CONTRACT_HEADING) == 1
    assert len(sr.get_history("agent_main")) == 5
    assert len(history2) == 5


async def test_caller_history_wins_and_stored_system_prompt_persists(env: Any) -> None:
    server, llm = env
    sr = SelfReference()
    sr.bind_history(
        "k",
        [
            {"role": "system", "content": "Stored prompt.\nUser preference: bullets."},
            {"role": "user", "content": "old"},
            {"role": "assistant", "content": "old answer"},
        ],
    )

    @llm_chat(llm, self_reference=sr, self_reference_key="k")
    async def agent(message: str, history: Any = None) -> None:
        """Docstring prompt."""

    server.script(Reply.text("ok"))
    caller = [{"role": "user", "content": "mine"}, {"role": "assistant", "content": "yours"}]
    await _turn(agent, "next", caller)
    sent = _messages(server, 0)
    assert sent[0]["content"].startswith("Stored prompt.\nUser preference: bullets.")
    assert [m["content"] for m in sent[1:]] == ["mine", "yours", "next"]
    assert [m["content"] for m in sr.get_history("k")[1:]] == ["mine", "yours", "next", "ok"]


async def test_tool_edits_merge_into_transcript_and_experiences(env: Any) -> None:
    server, llm = env
    sr = SelfReference()
    sr.remember("k", "first")
    sr.remember("k", "gone")
    sr.remember("k", "third")
    sr.forget("k", "exp_2")

    @tool
    async def note(text: str) -> str:
        """Write a note into memory."""
        sr.memory["k"].append({"role": "user", "content": f"[plan] {text}"})
        return sr.remember("k", text)["id"]

    @llm_chat(llm, toolkit=[note], self_reference=sr, self_reference_key="k")
    async def agent(message: str, history: Any = None) -> None:
        """You plan."""

    server.script(Reply.tool_calls(ToolCallSpec("note", {"text": "step 1"})), Reply.text("done"))
    text, history = await _turn(agent, "go")
    assert text == "done"
    first_system = _messages(server, 0)[0]["content"]
    assert "- [exp_1] first\n- [exp_3] third" in first_system
    assert "gone" not in first_system
    second = _messages(server, 1)
    assert "- [exp_4] step 1" in second[0]["content"]
    roles = [(m["role"], m.get("content")) for m in history]
    assert roles[1:3] == [("user", "go"), ("user", "[plan] step 1")]
    assert [r for r, _ in roles[3:]] == ["assistant", "tool", "assistant"]
    assert history[4]["content"] == "exp_4"
    assert sr.get_history("k")[1:] == history[1:]
    assert sr.get_experiences("k")[-1] == {"id": "exp_4", "text": "step 1"}


async def test_compaction_replaces_the_working_transcript(env: Any) -> None:
    server, llm = env
    sr = SelfReference()

    @tool
    async def squash() -> str:
        """Compact the context."""
        out = sr.compact("k", goal="answer the question", remember=["the answer is 42"])
        return str(out["summary_id"])

    @llm_chat(llm, toolkit=[squash], self_reference=sr, self_reference_key="k")
    async def agent(message: str, history: Any = None) -> None:
        """You compact."""

    old = [{"role": "user", "content": f"q{i}"} for i in range(3)]
    server.script(Reply.tool_calls(ToolCallSpec("squash", {})), Reply.text("42"))
    text, history = await _turn(agent, "what is it?", old)
    sent = _messages(server, 1)
    assert [m["role"] for m in sent] == ["system", "assistant"]
    assert sent[1]["content"].startswith("[Context summary]")
    assert "- [exp_1] the answer is 42" in sent[0]["content"]
    assert [m["role"] for m in history] == ["system", "assistant", "assistant"]
    assert text == "42"
    assert sr.get_history("k")[1:] == history[1:]
    assert sr.get_summaries("k")[0]["replaced_messages"] == 4


async def test_keys_isolated_and_implicit_backend(env: Any) -> None:
    server, llm = env
    sr = SelfReference()

    @llm_chat(llm, self_reference=sr, self_reference_key="agent_1")
    async def agent_1(message: str, history: Any = None) -> None:
        """One."""

    @llm_chat(llm, self_reference=sr, self_reference_key="agent_2")
    async def agent_2(message: str, history: Any = None) -> None:
        """Two."""

    @llm_chat(llm, self_reference_key="solo")
    async def solo(message: str, history: Any = None) -> None:
        """Solo."""

    server.script(Reply.text("a1"), Reply.text("a2"), Reply.text("s"))
    await _turn(agent_1, "to one")
    await _turn(agent_2, "to two")
    await _turn(solo, "alone")
    assert [m["content"] for m in sr.get_history("agent_1")] == ["One.", "to one", "a1"]
    assert [m["content"] for m in sr.get_history("agent_2")] == ["Two.", "to two", "a2"]
    assert 'memory["solo"]' in _messages(server, 2)[0]["content"]
    assert sr.keys() == ["agent_1", "agent_2"]


async def test_persisted_memory_drives_a_new_process_turn(env: Any, tmp_path: Any) -> None:
    server, llm = env
    path = tmp_path / "agent.db"
    first = SelfReference(path)

    @llm_chat(llm, self_reference=first, self_reference_key="k")
    async def agent(message: str, history: Any = None) -> None:
        """Persistent."""

    server.script(Reply.text("one"), Reply.text("two"))
    await _turn(agent, "first")
    first.close()
    second = SelfReference(path)

    @llm_chat(llm, self_reference=second, self_reference_key="k")
    async def agent2(message: str, history: Any = None) -> None:
        """Persistent."""

    await _turn(agent2, "second")
    assert [m["content"] for m in _messages(server, 1)[1:]] == ["first", "one", "second"]
    second.close()
