"""Approvals over AG-UI: the request is a CUSTOM ``approval_request`` whose value is AG-UI's
``Interrupt``; the client's answer comes back as ``resume`` entries of a ``RunAgentInput``
(validated with ``ag-ui-protocol``'s models), read by ``agui_resume_answers``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from ag_ui.core import Event, EventType, Interrupt, RunAgentInput
from pydantic import TypeAdapter

from simplellmfunc import ApprovalDecision, OpenAICompatible, llm_chat, tool
from simplellmfunc.engine import answer_request
from simplellmfunc.exceptions import AnswerRefusedError
from simplellmfunc.serving import AGUIAdapter, agui_resume_answers
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

RAN: list[str] = []


@tool(requires_approval=True)
async def pay(invoice: str) -> str:
    """Pay an invoice.

    Args:
        invoice: Its number.
    """
    RAN.append(invoice)
    return f"paid {invoice}"


def _resume(entry: dict[str, Any]) -> RunAgentInput:
    """What an AG-UI client sends to answer: a RunAgentInput with a resume entry."""
    body = {
        "threadId": "s1",
        "runId": "r2",
        "messages": [],
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "resume": [entry],
    }
    return RunAgentInput.model_validate(body)


@pytest.mark.parametrize(
    ("payload", "ran", "seen"),
    [
        ({"approved": True}, ["A-1"], "paid A-1"),
        ({"approved": False, "reason": "already paid"}, [], "already paid"),
        ({"approved": True, "editedArgs": {"invoice": "A-2"}}, ["A-2"], "paid A-2"),
        ({"decision": "deny", "reason": "wire form"}, [], "wire form"),
    ],
)
async def test_interrupt_and_resume(
    mock_server: MockLLMServer, payload: dict[str, Any], ran: list[str], seen: str
) -> None:
    RAN.clear()
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("pay", {"invoice": "A-1"}, id="c1")), Reply.text("ok")
    )
    parse = TypeAdapter(Event).validate_json
    adapter = AGUIAdapter()
    events: list[Any] = []
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[pay], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You pay."""

        with anyio.fail_after(20):
            async for item in agent("pay A-1", history=[], _session_id="s1"):
                for event in adapter.convert(item):
                    event = parse(event.model_dump_json(by_alias=True))
                    events.append(event)
                    if event.type == EventType.CUSTOM and event.name == "approval_request":
                        interrupt = Interrupt.model_validate(event.value)
                        assert interrupt.tool_call_id == "c1"
                        assert interrupt.metadata["arguments"] == {"invoice": "A-1"}
                        assert interrupt.metadata["tool_name"] == "pay"
                        entry = {"interruptId": interrupt.id, "status": "resolved"}
                        answers = agui_resume_answers(
                            _resume({**entry, "payload": payload}).resume or []
                        )
                        for call_id, answer in answers:
                            answer_request(call_id, answer, session_id="s1")
    assert ran == RAN
    (result,) = [e for e in events if e.type == EventType.TOOL_CALL_RESULT]
    assert seen in result.content
    resolved = [e for e in events if e.type == EventType.CUSTOM and e.name == "approval_resolved"]
    assert len(resolved) == 1
    assert events[-1].type == EventType.RUN_FINISHED


def test_resume_entries_cancelled_and_bad() -> None:
    cancelled = {"interruptId": "c1", "status": "cancelled"}
    assert agui_resume_answers([cancelled]) == [
        ("c1", ApprovalDecision.deny("cancelled by the client"))
    ]
    for bad in (
        {"interruptId": "c1", "status": "resolved", "payload": "yes"},
        {"interruptId": "c1", "status": "resolved", "payload": {"approved": "yes"}},
        {"interruptId": "c1", "status": "resolved", "payload": {"decision": "maybe"}},
        {"status": "resolved"},
    ):
        with pytest.raises(AnswerRefusedError):
            agui_resume_answers([bad])
