"""Text tool protocol, termination layers and the history window, through @llm_chat at the wire."""

from __future__ import annotations

from typing import Any

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.engine import HistoryWindow, TerminationPolicy
from simplellmfunc.hooks import ReactEndEvent, ToolCallEndEvent, is_event_yield
from simplellmfunc.providers import Capabilities
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts


@tool
async def get_sum(n: int) -> int:
    """Sum of 1..n."""
    return n * (n + 1) // 2


async def run(agent: Any, message: str, history: list[dict[str, Any]] | None = None) -> Any:
    end = None
    tools: list[ToolCallEndEvent] = []
    async for item in agent(message, history=history or []):
        if is_event_yield(item):
            if isinstance(item.event, ReactEndEvent):
                end = item.event
            elif isinstance(item.event, ToolCallEndEvent):
                tools.append(item.event)
    assert end is not None
    history_from_dicts(end.final_messages)  # always valid for the next call
    return end, tools


def text_llm(server: MockLLMServer) -> OpenAICompatible:
    return OpenAICompatible(
        "sk-test-key-0000",
        "m",
        server.url,
        capabilities=Capabilities(native_tools=False, json_schema=False),
    )


async def test_text_protocol_runs_a_tool_and_answers() -> None:
    async with MockLLMServer() as server, text_llm(server) as llm:
        server.script(
            Reply.text(
                'I will compute it.\n```json\n{"action": "get_sum", "input": {"n": 100}}\n```'
            ),
            Reply.text("The sum is 5050."),
        )

        @llm_chat(llm, toolkit=[get_sum], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, tools = await run(agent, "compute 1+2+...+100")
        assert end.final_response == "The sum is 5050."
        assert end.terminated_by == "answer"
        assert [t.result for t in tools] == ["5050"]
        first, second = server.requests
        assert "tools" not in first.json  # no native tools on the wire
        assert "get_sum" in first.json["messages"][0]["content"]  # the catalogue
        sent = second.json["messages"]
        assert all(m["role"] in ("system", "user", "assistant") for m in sent)
        assert sent[-1]["content"].startswith("Observation (")
        assert "5050" in sent[-1]["content"]
        assistant = [m for m in sent if m["role"] == "assistant"]
        assert sum('"action"' in (m.get("content") or "") for m in assistant) == 1  # once
        # The returned history stores the call natively, like native tool calls.
        assert any(m.get("tool_calls") for m in end.final_messages)


async def test_text_protocol_terminate_action_and_routing_errors() -> None:
    async with MockLLMServer() as server, text_llm(server) as llm:
        server.script(
            Reply.text('{"action": "no_such_tool", "input": {}}'),
            Reply.text('```json\n{"action": "terminate", "input": {"answer": "5050"}}\n```'),
        )

        @llm_chat(llm, toolkit=[get_sum], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, tools = await run(agent, "go")
        assert end.terminated_by == "terminate"
        assert end.final_response == "5050"
        assert not tools[0].success
        assert "get_sum" in tools[0].result


async def test_text_protocol_format_error_goes_back_as_an_observation() -> None:
    async with MockLLMServer() as server, text_llm(server) as llm:
        server.script(
            Reply.text('```json\n{"action": "get_sum", "input": {"n": 3,}}\n```'),
            Reply.text("6"),
        )

        @llm_chat(llm, toolkit=[get_sum], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, _ = await run(agent, "sum to 3")
        assert end.final_response == "6"
        feedback = server.requests[1].json["messages"][-1]
        assert feedback["role"] == "user"
        assert "not valid JSON" in feedback["content"]


async def test_a_call_with_a_final_answer_runs_the_tool_then_stops() -> None:
    """Seed 001 §3.3: the tool of a reply that also says "Final answer: ..." runs first (phase
    4), then the stop is checked (phase 7); the answer is the announced one, never the raw
    reply with its JSON."""
    async with MockLLMServer() as server, text_llm(server) as llm:
        server.script(
            Reply.text('Final Answer: 5050\n{"action": "get_sum", "input": {"n": 100}}'),
        )

        @llm_chat(llm, toolkit=[get_sum], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, tools = await run(agent, "go")
        assert (end.terminated_by, end.final_response) == ("implicit", "5050")
        assert [t.result for t in tools] == ["5050"]  # the tool ran
        assert len(server.requests) == 1  # and the run stopped after it
        last = end.final_messages[-1]
        assert (last["role"], last["content"]) == ("assistant", "5050")


async def test_implicit_signals_are_off_for_native_tools_by_default() -> None:
    async with (
        MockLLMServer() as server,
        OpenAICompatible("sk-test-key-0000", "m", server.url) as llm,
    ):
        call = ToolCallSpec("get_sum", {"n": 4})
        server.script(Reply.tool_calls(call, text="Final Answer: soon"), Reply.text("10"))

        @llm_chat(llm, toolkit=[get_sum], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, _ = await run(agent, "go")
        assert (end.terminated_by, end.final_response) == ("answer", "10")

        server.script(Reply.tool_calls(call, text="Final Answer: soon"))

        @llm_chat(llm, toolkit=[get_sum], enable_event=True,
                  termination=TerminationPolicy(implicit=True))  # fmt: skip
        async def eager(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, tools = await run(eager, "go")
        assert (end.terminated_by, end.final_response) == ("implicit", "soon")
        assert [t.result for t in tools] == ["10"]


async def test_max_steps_falls_back_to_the_last_text_when_extraction_fails() -> None:
    async with (
        MockLLMServer() as server,
        OpenAICompatible("sk-test-key-0000", "m", server.url, max_retries=0) as llm,
    ):
        server.script(
            Reply.tool_calls(ToolCallSpec("get_sum", {"n": 2}), text="Working on it: 3 so far."),
            Reply.error(400, "bad request"),
        )

        @llm_chat(llm, toolkit=[get_sum], enable_event=True, max_tool_calls=1)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        end, _ = await run(agent, "go")
        assert end.terminated_by == "max_steps"
        assert end.final_response == "Working on it: 3 so far."


def long_history(turns: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for n in range(turns):
        history.append({"role": "user", "content": f"question {n} " + "pad " * 40})
        history.append({
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"h{n}", "type": "function",
                            "function": {"name": "get_sum", "arguments": '{"n": 1}'}}],
        })  # fmt: skip
        history.append({"role": "tool", "tool_call_id": f"h{n}", "content": "1"})
        history.append({"role": "assistant", "content": f"answer {n}"})
    return history


async def test_history_window_sends_recent_turns_and_keeps_the_stored_history() -> None:
    async with (
        MockLLMServer() as server,
        OpenAICompatible("sk-test-key-0000", "m", server.url) as llm,
    ):
        server.script(Reply.text("ok"))

        @llm_chat(llm, toolkit=[get_sum], enable_event=True,
                  history_window=HistoryWindow(keep_recent_turns=3))  # fmt: skip
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You compute sums."""

        history = long_history(12)
        end, _ = await run(agent, "latest", history)
        sent = server.requests[0].json["messages"]
        assert sent[0]["role"] == "system"
        assert sent[1]["content"].startswith("[Summary of")
        assert [m["content"] for m in sent if m["role"] == "user"][-1] == "latest"
        ids = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
        assert ids == answered
        assert len(ids) == 2
        assert len(end.final_messages) == 1 + len(history) + 2  # stored history untouched


async def test_history_window_llm_summary() -> None:
    async with (
        MockLLMServer() as server,
        OpenAICompatible("sk-test-key-0000", "m", server.url) as llm,
    ):
        server.script(Reply.text("They asked eleven questions."), Reply.text("ok"))
        window = HistoryWindow(keep_recent_turns=2, strategy="summarize")

        @llm_chat(llm, enable_event=True, history_window=window)
        async def agent(message: str, history: list[dict[str, Any]] | None = None):
            """You answer."""

        history = [m for m in long_history(12) if m["role"] in ("user",)]
        history = [x for m in history for x in (m, {"role": "assistant", "content": "a"})]
        end, _ = await run(agent, "latest", history)
        summary_request, answer_request = server.requests
        assert "Summarize" in summary_request.json["messages"][0]["content"]
        assert "They asked eleven questions." in answer_request.json["messages"][1]["content"]
        assert end.total_usage.calls == 2
