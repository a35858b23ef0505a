"""SelfReference inside PyRepl: ``self_reference.memory[...]`` and ``runtime.selfref.context``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc.builtin import PyRepl, SelfReference
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec


@pytest.fixture
async def repl_sr(tmp_path: Any) -> AsyncIterator[tuple[PyRepl, SelfReference]]:
    sr = SelfReference()
    async with PyRepl(working_directory=tmp_path) as repl:
        repl.attach_self_reference(sr)
        yield repl, sr


async def test_memory_handle_in_kernel(repl_sr: Any) -> None:
    repl, sr = repl_sr
    sr.bind_history("agent_main", [{"role": "system", "content": "You are helpful."}])
    code = """
mem = self_reference.memory["agent_main"]
mem.append({"role": "user", "content": "[plan] step 1"})
mem.append_system_prompt("User preference: answer in concise bullet points.")
try:
    mem.append({"role": "wizard", "content": "x"})
except Exception as exc:
    print("rejected", exc.error_type)
print(mem.count(), mem.get(0)["content"])
"""
    result = await repl.execute(code)
    assert result["error"] is None, result
    assert "rejected InvalidHistoryError" in result["stdout"]
    assert (
        "2 You are helpful.\nUser preference: answer in concise bullet points."
        in (result["stdout"])
    )
    assert sr.get_history("agent_main")[1] == {"role": "user", "content": "[plan] step 1"}
    result = await repl.execute(
        'print(runtime.selfref.context.remember("likes tea", key="agent_main"))'
    )
    assert "'id': 'exp_1'" in result["stdout"], result
    await repl.reset()
    result = await repl.execute('print(self_reference.memory["agent_main"].count())')
    assert result["stdout"].strip() == "2"


async def test_agent_turn_edits_memory_through_execute_code(repl_sr: Any) -> None:
    repl, sr = repl_sr
    code = """
mem = self_reference.memory["agent_main"]
assert mem.all()[0]["role"] == "system"
mem.append({"role": "user", "content": "[plan] step 1"})
print(runtime.selfref.context.remember("the user likes tea")["id"])
"""
    async with MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, self_reference=sr, self_reference_key="agent_main")
        async def agent(message: str, history: Any = None) -> None:
            """You are an agent with memory."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})), Reply.text("noted")
        )
        items = [item async for item in agent("remember that I like tea")]
        history: list[dict[str, Any]] = items[-1][1]
        await llm.aclose()
        second = server.requests[1].json
    assert isinstance(second, dict)
    assert "- [exp_1] the user likes tea" in second["messages"][0]["content"]
    contents = [m.get("content") for m in history]
    assert contents[1:3] == ["remember that I like tea", "[plan] step 1"]
    assert [m["role"] for m in history[3:]] == ["assistant", "tool", "assistant"]
    assert "exp_1" in str(history[4]["content"])
    assert sr.get_experiences("agent_main") == [{"id": "exp_1", "text": "the user likes tea"}]
    assert sr.get_history("agent_main")[1:] == history[1:]


async def test_agent_compacts_then_answers_from_summary(repl_sr: Any) -> None:
    repl, sr = repl_sr
    code = """
info = runtime.selfref.context.inspect()
out = runtime.selfref.context.compact(
    goal="Tell the user the launch code",
    instruction="Answer from the summary",
    discoveries=["the launch code is 0000"],
    completed=["looked it up"],
    current_status="ready to answer",
    likely_next_work="answer",
    relevant_files_directories=[],
    remember=["launch code: 0000"],
)
print(info["message_count"], out["assistant_message"]["role"])
"""
    old = [{"role": "user", "content": f"chatter {i}"} for i in range(4)]
    async with MockLLMServer() as server:
        llm = OpenAICompatible("sk-test-123456789", "mock", server.url)

        @llm_chat(llm, toolkit=repl.toolset, self_reference=sr, self_reference_key="main")
        async def agent(message: str, history: Any = None) -> None:
            """You are an agent with memory."""

        server.script(
            Reply.tool_calls(ToolCallSpec("execute_code", {"code": code})),
            Reply.text("The launch code is 0000."),
        )
        items = [item async for item in agent("what is the code?", history=old)]
        history: list[dict[str, Any]] = items[-1][1]
        await llm.aclose()
        first, second = server.requests[0].json, server.requests[1].json
    assert isinstance(first, dict)
    assert isinstance(second, dict)
    assert len(first["messages"]) == 6
    sent = second["messages"]
    assert [m["role"] for m in sent] == ["system", "assistant"]
    assert "the launch code is 0000" in sent[1]["content"]
    assert "- [exp_1] launch code: 0000" in sent[0]["content"]
    assert [m["role"] for m in history] == ["system", "assistant", "assistant"]
    assert history[-1]["content"] == "The launch code is 0000."
    assert sr.get_summaries("main")[0]["replaced_messages"] == 5
