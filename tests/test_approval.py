"""Tool approval in the engine: calls that wait for a person (approve, deny, edit) in every
mode, a batch where one call waits while the others run, abort and timeout while waiting, a
denial in a GroupChat member, the per-call policy, and the answers' wire form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from simplellmfunc import AbortSignal, ApprovalDecision, OpenAICompatible, llm_chat, llm_function
from simplellmfunc import tool as make_tool
from simplellmfunc._messages import SystemMessage, UserMessage, history_from_dicts
from simplellmfunc._transcript import Transcript
from simplellmfunc.engine import EngineOptions, Invocation, Run, answer_request, parse_answer
from simplellmfunc.events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    EventYield,
    ReactEndEvent,
    ToolCallEndEvent,
)
from simplellmfunc.exceptions import AnswerRefusedError, DecoratorError, ToolDefinitionError
from simplellmfunc.runtime.multiagent import GroupChat
from simplellmfunc.testing import MockLLMServer, Reply, ScriptedLLM, ToolCallSpec
from simplellmfunc.tools import Tool

KEY = "sk-test-123456789"
GUARD = 20.0
RAN: list[str] = []


@make_tool(requires_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    RAN.append(path)
    return f"deleted {path}"


@make_tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    await anyio.sleep(0.01)
    return a + b


def _script(mock: MockLLMServer, *, then: str = "done") -> None:
    mock.script(
        Reply.tool_calls(ToolCallSpec("delete_file", {"path": "a.txt"}, id="c1")),
        Reply.text(then),
    )


def _tool_result(history: list[dict[str, Any]], call_id: str) -> str:
    return next(m["content"] for m in history if m.get("tool_call_id") == call_id)


ANSWERS = {
    "approve": (ApprovalDecision.approve(), "deleted a.txt", ["a.txt"]),
    "deny": (ApprovalDecision.deny("keep it"), "The user denied this call", []),
    "edit": (ApprovalDecision.edit({"path": "b.txt"}), "deleted b.txt", ["b.txt"]),
}


@pytest.mark.parametrize("kind", sorted(ANSWERS))
async def test_events_mode_answered_by_call_id(mock_server: MockLLMServer, kind: str) -> None:
    answer, expected, ran = ANSWERS[kind]
    RAN.clear()
    _script(mock_server)
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[delete_file], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        seen: list[Any] = []
        history: list[dict[str, Any]] = []
        with anyio.fail_after(GUARD):
            async for item in agent("clean up", history=[], _session_id="s1"):
                if isinstance(item, EventYield):
                    event = item.event
                    seen.append(event)
                    if isinstance(event, ApprovalRequestEvent):
                        assert (event.request_id, event.tool_name) == ("c1", "delete_file")
                        assert (event.arguments, event.session_id) == ({"path": "a.txt"}, "s1")
                        assert RAN == []  # not run before the answer
                        answer_request("c1", answer, session_id="s1")
                else:
                    history = list(item.messages)
    assert ran == RAN
    assert expected in _tool_result(history, "c1")
    if kind == "deny":
        assert "keep it" in _tool_result(history, "c1")
    if kind == "edit":
        assert "edited the arguments" in _tool_result(history, "c1")
    history_from_dicts(history)
    resolved = next(e for e in seen if isinstance(e, ApprovalResolvedEvent))
    assert resolved.outcome == {"approve": "approved", "deny": "denied", "edit": "edited"}[kind]
    # The model read the tool's answer (or the denial) in its next request.
    sent = mock_server.requests[1].json["messages"][-1]
    assert sent["tool_call_id"] == "c1"
    assert expected in sent["content"]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("kind", sorted(ANSWERS))
async def test_plain_and_stream_modes_ask_the_approver(
    mock_server: MockLLMServer, kind: str, stream: bool
) -> None:
    answer, expected, ran = ANSWERS[kind]
    RAN.clear()
    _script(mock_server)
    asked: list[ApprovalRequestEvent] = []

    async def approver(request: ApprovalRequestEvent) -> ApprovalDecision:
        asked.append(request)
        return answer

    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[delete_file], stream=stream, approver=approver)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        with anyio.fail_after(GUARD):
            items = [item async for item in agent("clean up", history=[])]
    history = items[-1][1]
    assert [r.tool_call_id for r in asked] == ["c1"]
    assert ran == RAN
    assert expected in _tool_result(history, "c1")
    history_from_dicts(history)


async def test_no_consumer_and_no_approver_is_denied(mock_server: MockLLMServer) -> None:
    RAN.clear()
    _script(mock_server)
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[delete_file])
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        items = [item async for item in agent("clean up", history=[])]
    assert RAN == []
    assert "nobody can be asked" in _tool_result(items[-1][1], "c1")


@pytest.mark.parametrize("kind", sorted(ANSWERS))
async def test_llm_function_with_a_tool(mock_server: MockLLMServer, kind: str) -> None:
    answer, expected, ran = ANSWERS[kind]
    RAN.clear()
    _script(mock_server, then="ok")
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_function(llm, toolkit=[delete_file], approver=lambda _request: answer)
        async def clean(task: str) -> str:
            """Do the task."""

        assert await clean("clean up") == "ok"
    assert ran == RAN
    sent = mock_server.requests[1].json["messages"][-1]
    assert expected in sent["content"]


async def test_policy_per_call_and_run_answer(mock_server: MockLLMServer) -> None:
    """A per-agent policy that sees tool and arguments; the Run object answers by call id."""
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("add", {"a": 1, "b": 2}, id="c1"),
            ToolCallSpec("add", {"a": 100, "b": 1}, id="c2"),
        ),
        Reply.text("done"),
    )
    seen: list[tuple[str, Mapping[str, Any]]] = []

    def big_sums(tool: Tool, arguments: Mapping[str, Any]) -> str | None:
        seen.append((tool.name, dict(arguments)))
        return "a big sum" if arguments.get("a", 0) > 10 else None

    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:
        invocation = Invocation(llm, "You add.", (add,), options=EngineOptions(approval=big_sums))
        transcript = Transcript([SystemMessage("You add."), UserMessage("sums")])
        run = Run(invocation, transcript, events=True)
        with anyio.fail_after(GUARD):
            async for item in run:
                event = getattr(item, "event", None)
                if isinstance(event, ApprovalRequestEvent):
                    assert (event.tool_call_id, event.reason) == ("c2", "a big sum")
                    with pytest.raises(AnswerRefusedError, match="no approval request 'c1'"):
                        run.answer("c1", ApprovalDecision.approve())
                    run.answer("c2", ApprovalDecision.edit({"a": 10, "b": 1}))
                    with pytest.raises(AnswerRefusedError):  # answered already
                        run.answer("c2", ApprovalDecision.approve())
        history = run.state.transcript.to_dicts()
    assert [name for name, _ in seen] == ["add", "add"]
    assert _tool_result(history, "c1") == "3"
    assert _tool_result(history, "c2").endswith("11")


async def test_batch_of_three_one_waits_while_the_others_run(mock_server: MockLLMServer) -> None:
    RAN.clear()
    mock_server.script(
        Reply.tool_calls(
            ToolCallSpec("add", {"a": 1, "b": 1}, id="c1"),
            ToolCallSpec("delete_file", {"path": "x"}, id="c2"),
            ToolCallSpec("add", {"a": 2, "b": 2}, id="c3"),
        ),
        Reply.text("done"),
    )
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[add, delete_file], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        ended: list[str] = []
        history: list[dict[str, Any]] = []
        with anyio.fail_after(GUARD):
            async for item in agent("go", history=[], _session_id="s2"):
                if not isinstance(item, EventYield):
                    history = list(item.messages)
                    continue
                event = item.event
                if isinstance(event, ToolCallEndEvent):
                    ended.append(event.tool_call_id)
                    if len(ended) == 2:  # both siblings finished while c2 waits
                        assert sorted(ended) == ["c1", "c3"]
                        answer_request("c2", ApprovalDecision.approve(), session_id="s2")
    assert sorted(ended[:2]) == ["c1", "c3"]
    assert ended[2] == "c2"
    assert [m.get("tool_call_id") for m in history if m["role"] == "tool"] == ["c1", "c2", "c3"]
    assert RAN == ["x"]


async def test_abort_while_waiting(mock_server: MockLLMServer) -> None:
    RAN.clear()
    _script(mock_server)
    abort = AbortSignal()
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[delete_file], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        end: ReactEndEvent | None = None
        with anyio.fail_after(GUARD):
            async for item in agent("go", history=[], _abort_signal=abort):
                event = getattr(item, "event", None)
                if isinstance(event, ApprovalRequestEvent):
                    abort.abort("the user closed the tab")
                if isinstance(event, ApprovalResolvedEvent):
                    assert event.outcome == "cancelled"
                if isinstance(event, ReactEndEvent):
                    end = event
                if not isinstance(item, EventYield):
                    history = list(item.messages)
    assert end is not None
    assert end.terminated_by == "aborted"
    assert RAN == []
    assert "the user closed the tab" in _tool_result(history, "c1")
    history_from_dicts(history)
    with pytest.raises(AnswerRefusedError):
        answer_request("c1", ApprovalDecision.approve())


async def test_timeout_while_waiting(mock_server: MockLLMServer) -> None:
    RAN.clear()
    _script(mock_server, then="nobody answered")
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[delete_file], enable_event=True, approval_timeout=0.2)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        outcomes: list[str] = []
        with anyio.fail_after(GUARD):
            async for item in agent("go", history=[], _session_id="s3"):
                event = getattr(item, "event", None)
                if isinstance(event, ApprovalResolvedEvent):
                    outcomes.append(event.outcome)
                if not isinstance(item, EventYield):
                    history = list(item.messages)
    assert outcomes == ["timeout"]
    assert RAN == []
    assert "no answer to the approval request within 0.2 s" in _tool_result(history, "c1")
    assert item.response == "nobody answered"
    with pytest.raises(AnswerRefusedError):  # late
        answer_request("c1", ApprovalDecision.approve(), session_id="s3")


async def test_denial_in_a_group_chat_member() -> None:
    RAN.clear()
    llm = ScriptedLLM(
        [
            ScriptedLLM.response(tool_calls=[ToolCallSpec("delete_file", {"path": "db"})]),
            "I was not allowed to delete it.",
            "TERMINATE: fine",
        ]
    )

    def no(_request: ApprovalRequestEvent) -> ApprovalDecision:
        return ApprovalDecision.deny("not the database")

    @llm_chat(llm, toolkit=[delete_file], approver=no)
    async def janitor(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You clean."""

    @llm_chat(llm)
    async def boss(message: str, history: list[dict[str, Any]] | None = None) -> None:
        """You check."""

    result = await GroupChat([janitor, boss], max_rounds=4).run("delete the db")
    assert RAN == []
    denied = llm.requests[1].messages[-1]
    assert denied.role == "tool"
    assert "not the database" in str(denied.content)
    assert result.text == "TERMINATE: fine"


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(ToolDefinitionError):
        make_tool(requires_approval="yes")(add.func)  # type: ignore[call-overload]
    with pytest.raises(DecoratorError, match="approval must be a callable"):
        EngineOptions(approval="all")  # type: ignore[arg-type]
    with pytest.raises(DecoratorError, match="approval_timeout"):
        EngineOptions(approval_timeout=0)


def test_wire_form() -> None:
    assert parse_answer({"request_id": "c1", "decision": "approve"}) == (
        "c1",
        ApprovalDecision.approve(),
    )
    _rid, answer = parse_answer({"request_id": "c1", "decision": "deny", "reason": "no"})
    assert answer == ApprovalDecision.deny("no")
    _rid, answer = parse_answer({"request_id": "c1", "decision": "edit", "arguments": {"a": 1}})
    assert isinstance(answer, ApprovalDecision)
    assert answer.arguments == {"a": 1}
    assert parse_answer({"request_id": "k1", "value": "42"}) == ("k1", "42")
    for bad, match in [
        ([], "JSON object"),
        ({"decision": "approve"}, "request_id"),
        ({"request_id": "c", "decision": "maybe"}, "decision must be"),
        ({"request_id": "c", "decision": "edit"}, "arguments"),
        ({"request_id": "c", "decision": "approve", "arguments": {}}, "arguments"),
        ({"request_id": "c", "value": 3}, "input"),
        ({"request_id": "c", "decision": "approve", "x": 1}, "unknown answer field"),
        ({"request_id": "c", "decision": "deny", "reason": 5}, "reason"),
    ]:
        with pytest.raises(AnswerRefusedError, match=match):
            parse_answer(bad)


def test_code_touches_system_reads_the_cell() -> None:
    from simplellmfunc.builtin import code_touches_system as check

    asks = {
        "import subprocess": "imports subprocess",
        "from shutil import rmtree": "imports shutil",
        "import os\nos.remove('x')": "calls remove()",
        "from pathlib import Path\nPath('a').write_text('b')": "calls write_text()",
        "open('a', 'w')": "for writing",
        "open('a', mode=m)": "for writing",
        "!ls": "shell or magic",
        "%%bash\nls": "shell or magic",
        "def (": "does not parse",
    }
    for code, reason in asks.items():
        assert reason in (check({"code": code}) or ""), code
    for code in ("x = 1 + 1", "open('a').read()", "import math\nmath.sqrt(2)", "print('rm')"):
        assert check({"code": code}) is None, code


async def test_failing_policy_and_approver_fail_closed(mock_server: MockLLMServer) -> None:

    def broken_policy(tool: Tool, arguments: Mapping[str, Any]) -> bool:
        raise RuntimeError("policy bug")

    def broken_approver(request: ApprovalRequestEvent) -> ApprovalDecision:
        assert "policy bug" in request.reason  # the failing policy asked
        raise RuntimeError("approver bug")

    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[add], approval=broken_policy, approver=broken_approver)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You help."""

        mock_server.script(
            Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2}, id="c1")), Reply.text("ok")
        )
        items = [item async for item in agent("go", history=[])]
    result = _tool_result(items[-1][1], "c1")
    assert "the approver failed (RuntimeError: approver bug)" in result


async def test_file_and_shell_tools_pass_the_option_through(
    mock_server: MockLLMServer, tmp_path: Any
) -> None:
    from simplellmfunc import FileToolset
    from simplellmfunc.runtime.commands import ShellTool

    files = {t.name: t for t in FileToolset(tmp_path, requires_approval=True).toolset}
    assert [n for n, t in files.items() if t.requires_approval] == ["sed", "echo_into"]
    with pytest.raises(ToolDefinitionError):
        ShellTool("touch", "touch {}", requires_approval="always")  # type: ignore[arg-type]
    touch = ShellTool("touch", f"touch {tmp_path}/{{}}", requires_approval=True)
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("touch", {"input": "made"}, id="c1")), Reply.text("ok")
    )
    async with OpenAICompatible(KEY, "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[touch], approver=lambda _r: ApprovalDecision.deny("no"))
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You touch files."""

        items = [item async for item in agent("go", history=[])]
    assert "denied" in _tool_result(items[-1][1], "c1")
    assert not (tmp_path / "made").exists()
