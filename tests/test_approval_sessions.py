"""Approvals and PyRepl ``input()`` through one answer API on ``SessionStore`` (session id +
request id, answers in their wire form), with a real kernel: the policy asks before a cell
that writes a file, passes a cell that only computes, and a denied cell never runs."""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import pytest

from simplellmfunc import OpenAICompatible, llm_chat
from simplellmfunc._messages import history_from_dicts
from simplellmfunc.builtin import code_touches_system
from simplellmfunc.engine import parse_answer
from simplellmfunc.events import ApprovalRequestEvent, CustomEvent, EventYield
from simplellmfunc.serving import SessionStore
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 60.0
WRITE = "open('note.txt', 'w').write('hi')\nprint('wrote')"
ASK = "name = input('Name: ')\nprint('hello', name)"


def _run(code: str, call_id: str) -> Reply:
    return Reply.tool_calls(ToolCallSpec("execute_code", {"code": code}, id=call_id))


async def _turn(sessions: SessionStore, message: str, wire: dict[str, Any]) -> list[Any]:
    """One turn; each request it waits for is answered with ``wire`` (its request id filled)."""
    items: list[Any] = []
    with anyio.fail_after(GUARD):
        async for item in sessions.chat("u1", message):
            items.append(item)
            event = item.event if isinstance(item, EventYield) else None
            request_id = None
            if isinstance(event, ApprovalRequestEvent):
                request_id = event.request_id
            elif isinstance(event, CustomEvent) and event.event_name == "kernel_input_request":
                request_id = event.data["request_id"]
            if request_id is not None:
                rid, answer = parse_answer({**wire, "request_id": request_id})
                sessions.answer("u1", rid, answer)
    return items


def _results(items: list[Any]) -> list[str]:
    history = items[-1].messages
    history_from_dicts(history)
    return [m["content"] for m in history if m["role"] == "tool"]


async def test_one_answer_api_for_approvals_and_input(mock_server: MockLLMServer) -> None:
    mock_server.script(
        _run(WRITE, "c1"),
        Reply.text("denied"),
        _run(WRITE, "c2"),
        Reply.text("written"),
        _run(ASK, "c3"),
        Reply.text("greeted"),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You run code."""

        repl = {"requires_approval": code_touches_system}
        async with SessionStore(agent, pyrepl=repl) as sessions:
            denied = await _turn(sessions, "write", {"decision": "deny", "reason": "no files"})
            assert any("no files" in r for r in _results(denied))
            session = sessions.get("u1")
            assert session.repl is not None
            check = await session.repl.execute("import os; os.path.exists('note.txt')")
            assert check["return_value"] == "False"  # the denied cell never ran

            approved = await _turn(sessions, "write", {"decision": "approve"})
            assert "wrote" in _results(approved)[-1]
            requests = [
                i.event
                for i in approved
                if isinstance(i, EventYield) and isinstance(i.event, ApprovalRequestEvent)
            ]
            assert [(r.session_id, r.reason) for r in requests] == [
                ("u1", "the cell opens a file for writing")
            ]

            # A cell that only reads input needs no approval; input() goes through the same
            # answer API and wire form.
            asked = await _turn(sessions, "greet", {"value": "Ada"})
            assert "hello Ada" in _results(asked)[-1]
            assert not any(
                isinstance(i, EventYield) and isinstance(i.event, ApprovalRequestEvent)
                for i in asked
            )


async def test_a_consumer_that_leaves_while_asked_parks_the_turn(
    mock_server: MockLLMServer,
) -> None:
    """Leaving while an approval waits does not abort the turn: ``pending`` says what waits,
    ``follow`` (once) takes the rest of the turn, the answer lets it run to its end."""
    from simplellmfunc import ApprovalDecision, tool
    from simplellmfunc.events import ResponseYield
    from simplellmfunc.exceptions import SessionError

    ran: list[str] = []

    @tool(requires_approval=True)
    async def wipe(path: str) -> str:
        """Wipe a path.

        Args:
            path: What to wipe.
        """
        ran.append(path)
        return f"wiped {path}"

    mock_server.script(
        Reply.tool_calls(ToolCallSpec("wipe", {"path": "/tmp/x"}, id="w1")), Reply.text("done")
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[wipe], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You wipe."""

        async with SessionStore(agent) as sessions:
            with anyio.fail_after(GUARD):
                async with aclosing(sessions.chat("p1", "wipe it")) as turn:
                    async for item in turn:
                        if isinstance(item, EventYield) and isinstance(
                            item.event, ApprovalRequestEvent
                        ):
                            break  # the consumer leaves (a reload, an A2A input-required)
                session = sessions.get("p1")
                assert session.busy
                assert session.abort_signal is not None
                assert not session.abort_signal.aborted
                (waiting,) = sessions.pending("p1")
                assert (waiting["kind"], waiting["tool_call_id"]) == ("approval_request", "w1")
                rest = sessions.follow("p1")
                with pytest.raises(SessionError, match="no turn waiting to be followed"):
                    sessions.follow("p1")  # a turn is followed once
                sessions.answer("p1", "w1", ApprovalDecision.approve())
                items = [item async for item in rest]
            assert ran == ["/tmp/x"]
            assert sessions.pending("p1") == []
            assert isinstance(items[-1], ResponseYield)
            assert items[-1].response == "done"
            await session.wait_idle()
            history_from_dicts(session.history)
            assert [m["role"] for m in session.history][-2:] == ["tool", "assistant"]
