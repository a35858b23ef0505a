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


# -- interrupt and resume as separate runs, over HTTP -------------------------------------------


def _agui_app(served: Any) -> Any:
    """An AG-UI endpoint over a served agent: POST a RunAgentInput, read the run's SSE."""
    from ag_ui.encoder import EventEncoder
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from simplellmfunc.serving import agui_run

    async def run(request: Request) -> StreamingResponse:
        run_input = RunAgentInput.model_validate_json(await request.body())
        encoder = EventEncoder()

        async def frames() -> Any:
            async for event in agui_run(served, run_input):
                yield encoder.encode(event)

        return StreamingResponse(frames(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agui", run, methods=["POST"])])


async def _post_run(http: Any, url: str, body: dict[str, Any]) -> list[Any]:
    """One AG-UI run: every SSE event, validated with ag_ui's own Event union."""
    parse = TypeAdapter(Event).validate_json
    RunAgentInput.model_validate(body)  # what the client sends is valid AG-UI too
    events = []
    async with http.stream("POST", f"{url}/agui", json=body) as response:
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(parse(line[len("data: ") :]))
    return events


def _input(run_id: str, messages: list[dict[str, Any]], resume: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": "t1",
        "runId": run_id,
        "messages": messages,
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }
    if resume is not None:
        body["resume"] = resume
    return body


async def test_interrupt_ends_the_run_and_resume_continues_it(mock_server: MockLLMServer) -> None:
    import httpx

    from simplellmfunc.serving import ServedAgent, running

    RAN.clear()
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("pay", {"invoice": "A-1"}, id="c1")),
        Reply.text("Paid A-2 instead."),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[pay], stream=True, enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You pay."""

        async with (
            ServedAgent(agent) as served,
            running(lambda url: _agui_app(served)) as url,
            httpx.AsyncClient(timeout=20) as http,
        ):
            user = [{"id": "u1", "role": "user", "content": "pay A-1"}]
            with anyio.fail_after(20):
                first = await _post_run(http, url, _input("r1", user))
                ran_while_interrupted = list(RAN)
                wrong = [{"interruptId": "nope", "status": "resolved", "payload": {}}]
                refused = await _post_run(http, url, _input("r2", user, wrong))
                edit = {"approved": True, "editedArgs": {"invoice": "A-2"}}
                resume = [{"interruptId": "c1", "status": "resolved", "payload": edit}]
                second = await _post_run(http, url, _input("r3", user, resume))
            history = await served.sessions.history("t1")

    # Run 1 ends with the interrupt outcome (the tool did not run), naming the call.
    assert first[0].type == EventType.RUN_STARTED
    assert first[0].run_id == "r1"
    end = first[-1]
    assert end.type == EventType.RUN_FINISHED
    assert end.outcome.type == "interrupt"
    (interrupt,) = end.outcome.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == ("c1", "tool_approval", "c1")
    assert interrupt.metadata["arguments"] == {"invoice": "A-1"}
    assert ran_while_interrupted == []
    # A resume that answers no open interrupt is a RUN_ERROR; the interrupt stays open.
    assert [e.type for e in refused] == [EventType.RUN_STARTED, EventType.RUN_ERROR]
    assert "no open interrupt has id 'nope'" in refused[-1].message
    # Run 3 resumes: a new run id, the same turn goes on with the edited arguments.
    assert second[0].type == EventType.RUN_STARTED
    assert second[0].run_id == "r3"
    assert RAN == ["A-2"]
    (result,) = [e for e in second if e.type == EventType.TOOL_CALL_RESULT]
    assert "paid A-2" in result.content
    assert second[-1].type == EventType.RUN_FINISHED
    assert second[-1].outcome.type == "success"
    assert second[-1].result["text"] == "Paid A-2 instead."
    assert [m["role"] for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    _keep_capture(end, resume)


def _keep_capture(end: Any, resume: list[dict[str, Any]]) -> None:
    import json
    import os
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    artifacts = Path(os.environ.get("TEST_ARTIFACTS") or repo / ".cache" / "test-artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    capture = {
        "run_1_ends": end.model_dump(mode="json", by_alias=True, exclude_none=True),
        "run_2_resume": resume,
    }
    (artifacts / "agui-interrupt.json").write_text(json.dumps(capture, indent=2) + "\n")


async def test_input_interrupt_is_answered_by_resume(mock_server: MockLLMServer) -> None:
    """A PyRepl ``input()`` is an interrupt too (``reason="input"``); a new message while it is
    open is a RUN_ERROR; the resume entry's payload is the line typed."""
    import httpx

    from simplellmfunc.serving import ServedAgent, running

    ask = "name = input('Your name? ')\nprint('hello', name)"
    mock_server.script(
        Reply.tool_calls(ToolCallSpec("execute_code", {"code": ask}, id="k1")),
        Reply.text("Greeted."),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You run code."""

        async with (
            ServedAgent(agent, pyrepl=True) as served,
            running(lambda url: _agui_app(served)) as url,
            httpx.AsyncClient(timeout=60) as http,
        ):
            user = [{"id": "u1", "role": "user", "content": "greet me"}]
            with anyio.fail_after(60):
                first = await _post_run(http, url, _input("r1", user))
                (interrupt,) = first[-1].outcome.interrupts
                again = await _post_run(http, url, _input("r2", user))
                entry = {"interruptId": interrupt.id, "status": "resolved", "payload": "Ada"}
                second = await _post_run(http, url, _input("r3", user, [entry]))
            history = await served.sessions.history("t1")
    assert (interrupt.reason, interrupt.message, interrupt.tool_call_id) == (
        "input",
        "Your name? ",
        "k1",
    )
    assert interrupt.response_schema is not None
    assert again[-1].type == EventType.RUN_ERROR
    assert "open interrupts" in again[-1].message
    assert second[-1].outcome.type == "success"
    tool_results = [m["content"] for m in history if m["role"] == "tool"]
    assert "hello Ada" in tool_results[0]


async def test_an_agui_run_enters_through_the_door(mock_server: MockLLMServer) -> None:
    """A new message's run is a turn of the served agent: refused (RUN_ERROR, code capacity)
    while ``max_turns`` turns run, admitted again once they end."""
    from simplellmfunc.runtime.config import ServeLimits
    from simplellmfunc.serving import ServedAgent, agui_run

    entered, release = anyio.Event(), anyio.Event()

    @tool
    async def hold() -> str:
        """Wait until the test lets go."""
        entered.set()
        await release.wait()
        return "held"

    mock_server.script(
        Reply.tool_calls(ToolCallSpec("hold", {}, id="h1")),
        Reply.text("Done."),
        Reply.text("Second."),
    )
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as llm:

        @llm_chat(llm, toolkit=[hold], enable_event=True)
        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """You hold."""

        user = [{"id": "u1", "role": "user", "content": "hold"}]

        async def run(thread: str, run_id: str) -> list[Any]:
            run_input = RunAgentInput.model_validate({**_input(run_id, user), "threadId": thread})
            return [event async for event in agui_run(served, run_input)]

        first: list[Any] = []

        async def first_run() -> None:
            first.extend(await run("a", "r1"))

        async with ServedAgent(agent, limits=ServeLimits(max_turns=1)) as served:
            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(first_run)
                    await entered.wait()
                    refused = await run("b", "r2")
                    release.set()
                admitted = await run("b", "r3")
    assert refused[-1].type == EventType.RUN_ERROR
    assert refused[-1].code == "capacity"
    assert first[-1].type == EventType.RUN_FINISHED
    assert admitted[-1].type == EventType.RUN_FINISHED
