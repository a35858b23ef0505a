"""A session's turns as AG-UI runs, with interrupts and resume as separate runs.

AG-UI has no channel from the client into a running run, so a run that needs a person does not
wait in the open stream: :func:`agui_run` ends it with ``RUN_FINISHED`` whose ``outcome`` is
``{"type": "interrupt", "interrupts": [...]}`` (one AG-UI ``Interrupt`` per waiting request:
a tool approval, ``reason="tool_approval"``; a PyRepl ``input()``, ``reason="input"``) while
the turn itself stays parked in its session. The client's next ``RunAgentInput`` on the same
thread carries ``resume`` entries, one per open interrupt (AG-UI's coverage rule: each answered
once, nothing else); that run answers them and streams the rest of the same turn, to
``RUN_FINISHED`` with the success outcome or to the next interrupt.

A resume entry of an approval is read by :func:`~simplellmfunc.wire.agui_resume_answers`
(``{"approved": bool, "editedArgs"?, "reason"?}`` or our wire form; ``cancelled`` denies); one
of an ``input()`` has the typed text as its payload (a string, or ``{"value": "..."}``;
``cancelled`` answers an empty line). A resume that breaks the rule, or a new message while
interrupts are open, is a ``RUN_ERROR``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from ag_ui import core

from .._messages import dict_content_text
from ..exceptions import AnswerRefusedError, CapacityError, InputRefusedError, SessionError
from ._agui import AGUIAdapter, agui_resume_answers
from ._json import WirePolicy, jsonable
from ._served import ServedAgent, TurnRequest
from ._store import SessionStore
from ._waits import asked_request_id, pending_request_id, wait_kind

__all__ = ["agui_interrupts", "agui_run"]

_INPUT_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}}


def agui_interrupts(waits: Sequence[Mapping[str, Any]]) -> list[core.Interrupt]:
    """AG-UI's ``Interrupt`` of each waiting request (``SessionStore.pending``)."""
    out = []
    for wait in waits:
        request_id = pending_request_id(wait)
        if wait_kind(wait) == "input":
            data = wait.get("data") or {}
            out.append(
                core.Interrupt(
                    id=request_id,
                    reason="input",
                    message=str(data.get("prompt") or ""),
                    tool_call_id=wait.get("tool_call_id"),
                    response_schema=_INPUT_SCHEMA,
                    metadata={"tool_name": wait.get("tool_name"), "password": data.get("password")},
                )
            )
            continue
        out.append(
            core.Interrupt(
                id=request_id,
                reason="tool_approval",
                message=str(wait.get("reason") or ""),
                tool_call_id=request_id,
                metadata={
                    "tool_name": wait.get("tool_name"),
                    "arguments": jsonable(wait.get("arguments")),
                    "session_id": wait.get("session_id"),
                    "timeout_s": wait.get("timeout_s"),
                },
            )
        )
    return out


async def agui_run(
    agent: ServedAgent,
    run_input: core.RunAgentInput,
    *,
    session_id: str | None = None,
    principal: str = "",
    policy: WirePolicy | None = None,
) -> AsyncIterator[core.BaseEvent]:
    """One AG-UI run on ``agent``: the thread is the session (``session_id``, default the
    input's ``thread_id``). Without ``resume`` the last user message starts a turn through
    the agent's door (:meth:`ServedAgent.turn`: admitted under its limits, counted toward
    ``max_turns``, for ``principal``); with it, the entries answer the open interrupts and
    the parked turn goes on. The run ends with ``RUN_FINISHED`` (success, or interrupt when
    the turn waits for a person) or ``RUN_ERROR`` (a refused resume, a refused or failed
    turn). Encode the events with ``ag_ui.encoder.EventEncoder`` (see
    :func:`~simplellmfunc.wire.agui_sse_stream`).
    """
    sid = session_id or run_input.thread_id
    adapter = AGUIAdapter(run_input.thread_id, run_input.run_id, policy)
    sessions = agent.sessions
    try:
        if run_input.resume:
            await sessions.open_session(sid)
            _answer(sessions, sid, run_input.resume)
            items: AsyncIterator[Any] = sessions.follow(sid)
            for event in adapter.begin():
                yield event
        else:
            if sessions.pending(sid):
                raise AnswerRefusedError(
                    "the thread has open interrupts: resume them (RunAgentInput.resume) first"
                )
            text = _last_user_text(run_input)
            agent.admit(sid, principal)  # refused now, as a RUN_ERROR of its own
            items = agent.turn(TurnRequest(text, session_id=sid, principal=principal))
    except (AnswerRefusedError, InputRefusedError, SessionError, CapacityError) as exc:
        for event in adapter.begin():
            yield event
        code = "capacity" if isinstance(exc, CapacityError) else "resume_refused"
        yield core.RunErrorEvent(message=str(exc), code=code)
        return
    started = bool(run_input.resume)
    async with aclosing(items) as turn:  # type: ignore[type-var]
        try:
            async for item in turn:
                for event in adapter.convert(item):
                    started = True
                    yield event
                asked = asked_request_id(item)
                waits = sessions.pending(sid)
                if asked is not None and asked in {pending_request_id(w) for w in waits}:
                    for event in adapter.interrupt(agui_interrupts(waits)):
                        yield event
                    return  # leaving parks the turn: the resume run follows it
        except Exception as exc:  # boundary: the client learns of a failed turn as RUN_ERROR
            for event in [] if started else adapter.begin():
                yield event
            yield core.RunErrorEvent(message=f"{type(exc).__name__}: {exc}", code="error")


def _answer(sessions: SessionStore, sid: str, resume: Sequence[core.ResumeEntry]) -> None:
    """Answer every open interrupt of the thread, each once, from ``resume``."""
    waits = {pending_request_id(w): w for w in sessions.pending(sid)}
    if not waits:
        raise AnswerRefusedError(f"thread {sid!r} has no open interrupt to resume")
    ids = [entry.interrupt_id for entry in resume]
    unknown = sorted(set(ids) - set(waits))
    if unknown:
        raise AnswerRefusedError(f"no open interrupt has id {unknown[0]!r}")
    if len(set(ids)) != len(ids):
        raise AnswerRefusedError("an interrupt is answered twice")
    missing = [i for i in waits if i not in ids]
    if missing:
        raise AnswerRefusedError(
            f"a resume must answer every open interrupt; unanswered: {', '.join(missing)}"
        )
    answers: list[tuple[str, Any]] = []
    for entry in resume:
        if wait_kind(waits[entry.interrupt_id]) == "input":
            answers.append((entry.interrupt_id, _typed(entry)))
        else:
            answers += agui_resume_answers([entry])
    for request_id, answer in answers:  # all read before any is given
        sessions.answer(sid, request_id, answer)


def _typed(entry: core.ResumeEntry) -> str:
    if entry.status == "cancelled":
        return ""
    payload = entry.payload
    value = payload.get("value") if isinstance(payload, Mapping) else payload
    if not isinstance(value, str):
        raise AnswerRefusedError(
            f"resume entry {entry.interrupt_id!r}: an input() answer is a string or {{value}}"
        )
    return value


def _last_user_text(run_input: core.RunAgentInput) -> str:
    for message in reversed(run_input.messages):
        if isinstance(message, core.UserMessage):
            content = message.content
            if isinstance(content, str):
                return content
            return dict_content_text([part.model_dump(mode="json") for part in content])
    raise AnswerRefusedError("the run has no user message to answer")
