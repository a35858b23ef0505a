"""Our events as AG-UI protocol events (PyPI ``ag-ui-protocol``, the ``[agui]`` extra).

One :class:`AGUIAdapter` per turn turns each ``EventYield`` into zero or more ``ag_ui.core``
events, so an AG-UI front end can drive our agents:

* the run: ``RUN_STARTED`` / ``RUN_FINISHED`` (``result``: text, ``terminated_by``, abort) or
  ``RUN_ERROR``; iterations as ``STEP_STARTED`` / ``STEP_FINISHED``;
* the reply: ``TEXT_MESSAGE_START`` / ``_CONTENT`` / ``_END``, reasoning as ``REASONING_*``;
* tools: ``TOOL_CALL_START`` / ``_ARGS`` / ``_END`` then ``TOOL_CALL_RESULT`` (the text the
  model sees, cut by the :class:`WirePolicy`); a failed or cancelled call also gets a
  ``CUSTOM`` ``tool_call_error``;
* tool events (PyRepl's ``kernel_stdout`` / ``kernel_stderr`` / ``kernel_input_request``, any
  ``CustomEvent``): ``CUSTOM`` with ``name`` = the event name and ``value`` =
  ``{"tool_call_id", "tool_name", "data"}``; an ``LLMCallErrorEvent`` is ``CUSTOM``
  ``llm_call_error``;
* approvals: ``CUSTOM`` ``approval_request`` (its value AG-UI's ``Interrupt``: ``id`` = the
  call id, ``tool_call_id``, ``message`` = the reason, ``metadata`` = tool name, arguments,
  session id, timeout) and ``CUSTOM`` ``approval_resolved``; :func:`agui_resume_answers` reads a
  client's ``resume`` entries as answers; :meth:`AGUIAdapter.interrupt` ends a run on AG-UI's
  interrupt outcome and :meth:`AGUIAdapter.begin` starts the run that resumes it (a session's
  turn as such runs: ``serving.agui_run``);
* SelfReference forks: ``SUBAGENT_STARTED`` / ``SUBAGENT_FINISHED`` and a ``STATE_DELTA`` on
  ``/forks/<fork_id>``; every event of a fork carries ``subagent_run_id`` (the fork's call id).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any

from ag_ui import core
from ag_ui.encoder import EventEncoder

from .._events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    CustomEvent,
    EventOrigin,
    EventYield,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ReactEvent,
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    ReactStartEvent,
    ToolCallArgumentsDeltaEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallStartEvent,
)
from ..engine import ApprovalDecision, parse_answer
from ..exceptions import AnswerRefusedError
from ._json import WirePolicy, jsonable
from ._sse import close_source

__all__ = ["AGUIAdapter", "agui_resume_answers", "agui_sse_stream"]


class _Reply:
    """The open text / reasoning messages of one agent call (root or fork)."""

    __slots__ = ("count", "reasoning", "text")

    def __init__(self) -> None:
        self.count = 0
        self.text: str | None = None
        self.reasoning: str | None = None


class AGUIAdapter:
    """Turns the events of one turn into AG-UI events (keep one adapter per turn).

    Args:
        thread_id: The AG-UI thread (default: the events' session id, else the call id).
        run_id: The AG-UI run id (default: the root call's ``agent_call_id``).
        policy: Size policy for tool results and custom payloads.
    """

    def __init__(
        self,
        thread_id: str | None = None,
        run_id: str | None = None,
        policy: WirePolicy | None = None,
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self._policy = policy or WirePolicy()
        self._replies: dict[str, _Reply] = {}
        self._open_calls: set[str] = set()
        self._seen_calls: set[str] = set()
        self._started = False

    def convert(self, item: Any) -> list[core.BaseEvent]:
        """The AG-UI events for one item of the stream (nothing for items that are not events)."""
        if not isinstance(item, EventYield):
            return []
        origin = item.origin
        sub = origin.agent_call_id if origin.fork_id else None
        return [self._tag(e, sub) for e in self._events(item.event, origin, sub)]

    @staticmethod
    def _tag(event: core.BaseEvent, sub: str | None) -> core.BaseEvent:
        if sub is not None and "subagent_run_id" in type(event).model_fields:
            event.subagent_run_id = sub  # type: ignore[attr-defined]
        return event

    def _events(
        self, event: ReactEvent, origin: EventOrigin, sub: str | None
    ) -> list[core.BaseEvent]:
        match event:
            case ReactStartEvent():
                return self._start(origin)
            case ReactEndEvent():
                return self._end(event, origin)
            case ReactIterationStartEvent(iteration=n):
                return [core.StepStartedEvent(step_name=f"iteration {n}")]
            case ReactIterationEndEvent(iteration=n):
                return [core.StepFinishedEvent(step_name=f"iteration {n}")]
            case LLMChunkArriveEvent():
                return self._chunk(event, origin)
            case LLMCallEndEvent():
                return self._reply_end(event, origin)
            case ToolCallArgumentsDeltaEvent():
                out = self._open_call(event.tool_call_id, event.tool_name, origin)
                out.append(
                    core.ToolCallArgsEvent(
                        tool_call_id=event.tool_call_id, delta=event.arguments_delta
                    )
                )
                return out
            case ToolCallStartEvent():
                out = self._open_call(event.tool_call_id, event.tool_name, origin, event.arguments)
                out.append(core.ToolCallEndEvent(tool_call_id=event.tool_call_id))
                self._open_calls.discard(event.tool_call_id)
                return out
            case ToolCallEndEvent():
                out = []
                if event.tool_call_id not in self._seen_calls:
                    # A call that never started (unknown tool, bad arguments, cancelled).
                    out = self._open_call(event.tool_call_id, event.tool_name, origin)
                    out.append(core.ToolCallEndEvent(tool_call_id=event.tool_call_id))
                content = jsonable(event.result, self._policy.max_text_chars)
                out.append(
                    core.ToolCallResultEvent(
                        message_id=f"{event.tool_call_id}-result",
                        tool_call_id=event.tool_call_id,
                        content=content,
                        role="tool",
                        # AG-UI's result has no outcome field: a failed call says so here
                        # (its error also came as the tool_call_error custom event).
                        metadata={"success": event.success},
                    )
                )
                return out
            case ToolCallErrorEvent():
                return [
                    self._custom(
                        "tool_call_error",
                        event.tool_name,
                        event.tool_call_id,
                        {"error_type": event.error_type, "message": event.message},
                    )
                ]
            case LLMCallErrorEvent():
                return [self._custom("llm_call_error", None, None, jsonable(event))]
            case ApprovalRequestEvent():
                return [core.CustomEvent(name="approval_request", value=_interrupt(event))]
            case ApprovalResolvedEvent():
                value = {
                    "tool_call_id": event.tool_call_id,
                    "tool_name": event.tool_name,
                    "outcome": event.outcome,
                    "reason": event.reason,
                    "arguments": jsonable(event.arguments),
                }
                return [core.CustomEvent(name="approval_resolved", value=value)]
            case CustomEvent():
                return [
                    self._custom(event.event_name, event.tool_name, event.tool_call_id, event.data)
                ]
        return []  # batch and LLM-call starts: nothing an AG-UI front end shows

    def _custom(
        self, name: str, tool: str | None, call_id: str | None, data: Any
    ) -> core.BaseEvent:
        value = {
            "tool_call_id": call_id,
            "tool_name": tool,
            "data": jsonable(data, self._policy.max_text_chars),
        }
        return core.CustomEvent(name=name, value=value)

    # -- run and forks ---------------------------------------------------------------------

    def _start(self, origin: EventOrigin) -> list[core.BaseEvent]:
        self._replies[origin.agent_call_id] = _Reply()
        if origin.fork_id:
            fork = {
                "fork_id": origin.fork_id,
                "agent_call_id": origin.agent_call_id,
                "parent_call_id": origin.parent_call_id,
                "depth": origin.fork_depth,
                "status": "running",
            }
            return [
                core.SubagentStartedEvent(
                    subagent_run_id=origin.agent_call_id, name=f"fork {origin.fork_id}"
                ),
                core.StateDeltaEvent(
                    delta=[{"op": "add", "path": f"/forks/{origin.fork_id}", "value": fork}]
                ),
            ]
        if self._started:
            return []
        self._started = True
        self.run_id = self.run_id or origin.agent_call_id
        self.thread_id = self.thread_id or origin.session_id or origin.agent_call_id
        return [
            core.RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id),
            core.StateSnapshotEvent(snapshot={"forks": {}}),
        ]

    def _end(self, event: ReactEndEvent, origin: EventOrigin) -> list[core.BaseEvent]:
        out = self._close_reply(origin)
        if origin.fork_id:
            status = "error" if event.error else event.terminated_by
            patch = {"op": "replace", "path": f"/forks/{origin.fork_id}/status", "value": status}
            out.append(core.StateDeltaEvent(delta=[patch]))
            out.append(core.SubagentFinishedEvent(subagent_run_id=origin.agent_call_id))
            return out
        if event.error is not None:
            out.append(core.RunErrorEvent(message=event.error, code=event.terminated_by))
            return out
        result = {
            "text": event.final_response,
            "terminated_by": event.terminated_by,
            "aborted": event.aborted,
            "abort_reason": event.abort_reason,
        }
        out.append(
            core.RunFinishedEvent(
                thread_id=self.thread_id or "",
                run_id=self.run_id or "",
                result=result,
                outcome=core.RunFinishedSuccessOutcome(),
            )
        )
        return out

    def begin(self) -> list[core.BaseEvent]:
        """``RUN_STARTED`` of a run that resumes a turn already running (its start event
        came in the run it interrupted)."""
        self._started = True
        return [core.RunStartedEvent(thread_id=self.thread_id or "", run_id=self.run_id or "")]

    def interrupt(self, interrupts: Sequence[core.Interrupt]) -> list[core.BaseEvent]:
        """The end of a run that waits for a person: open messages and tool calls closed,
        then ``RUN_FINISHED`` with the interrupt outcome (a resume run answers them)."""
        out: list[core.BaseEvent] = []
        for reply in self._replies.values():
            if reply.text is not None:
                out.append(core.TextMessageEndEvent(message_id=reply.text))
                reply.text = None
        out += [core.ToolCallEndEvent(tool_call_id=c) for c in sorted(self._open_calls)]
        self._open_calls.clear()
        outcome = core.RunFinishedInterruptOutcome(interrupts=list(interrupts))
        out.append(
            core.RunFinishedEvent(
                thread_id=self.thread_id or "", run_id=self.run_id or "", outcome=outcome
            )
        )
        return out

    # -- text and reasoning ----------------------------------------------------------------

    def _reply(self, origin: EventOrigin) -> _Reply:
        return self._replies.setdefault(origin.agent_call_id, _Reply())

    def _chunk(self, event: LLMChunkArriveEvent, origin: EventOrigin) -> list[core.BaseEvent]:
        reply = self._reply(origin)
        out: list[core.BaseEvent] = []
        if event.reasoning:
            if reply.reasoning is None:
                reply.reasoning = f"{origin.agent_call_id}-r{reply.count}"
                out.append(core.ReasoningStartEvent(message_id=reply.reasoning))
                out.append(
                    core.ReasoningMessageStartEvent(message_id=reply.reasoning, role="reasoning")
                )
            out.append(
                core.ReasoningMessageContentEvent(message_id=reply.reasoning, delta=event.reasoning)
            )
        if event.text:
            if reply.text is None:
                reply.text = self._new_message(reply, origin)
                out.append(core.TextMessageStartEvent(message_id=reply.text, role="assistant"))
            out.append(core.TextMessageContentEvent(message_id=reply.text, delta=event.text))
        return out

    def _new_message(self, reply: _Reply, origin: EventOrigin) -> str:
        reply.count += 1
        return f"{origin.agent_call_id}-m{reply.count}"

    def _reply_end(self, event: LLMCallEndEvent, origin: EventOrigin) -> list[core.BaseEvent]:
        reply = self._reply(origin)
        out: list[core.BaseEvent] = []
        if reply.text is None and event.reply_text:  # not streamed: the whole text at once
            message_id = self._new_message(reply, origin)
            out.append(core.TextMessageStartEvent(message_id=message_id, role="assistant"))
            out.append(core.TextMessageContentEvent(message_id=message_id, delta=event.reply_text))
            out.append(core.TextMessageEndEvent(message_id=message_id))
        return out + self._close_reply(origin)

    def _close_reply(self, origin: EventOrigin) -> list[core.BaseEvent]:
        reply = self._reply(origin)
        out: list[core.BaseEvent] = []
        if reply.reasoning is not None:
            out.append(core.ReasoningMessageEndEvent(message_id=reply.reasoning))
            out.append(core.ReasoningEndEvent(message_id=reply.reasoning))
            reply.reasoning = None
        if reply.text is not None:
            out.append(core.TextMessageEndEvent(message_id=reply.text))
            reply.text = None
        return out

    # -- tool calls ------------------------------------------------------------------------

    def _open_call(
        self, call_id: str, name: str, origin: EventOrigin, arguments: Any = None
    ) -> list[core.BaseEvent]:
        out: list[core.BaseEvent] = []
        if call_id in self._seen_calls:
            return out
        out.extend(self._close_reply(origin))
        self._open_calls.add(call_id)
        self._seen_calls.add(call_id)
        reply = self._reply(origin)
        parent = f"{origin.agent_call_id}-m{reply.count}" if reply.count else None
        out.append(
            core.ToolCallStartEvent(
                tool_call_id=call_id, tool_call_name=name, parent_message_id=parent
            )
        )
        if arguments is not None:
            args = json.dumps(jsonable(arguments), ensure_ascii=False)
            out.append(core.ToolCallArgsEvent(tool_call_id=call_id, delta=args))
        return out


def _interrupt(event: ApprovalRequestEvent) -> dict[str, Any]:
    """The request as AG-UI's ``Interrupt`` (JSON, camelCase like the rest of the stream)."""
    interrupt = core.Interrupt(
        id=event.tool_call_id,
        reason="tool_approval",
        message=event.reason,
        tool_call_id=event.tool_call_id,
        metadata={
            "tool_name": event.tool_name,
            "arguments": jsonable(event.arguments),
            "session_id": event.session_id,
            "timeout_s": event.timeout_s,
        },
    )
    return interrupt.model_dump(mode="json", by_alias=True, exclude_none=True)


def agui_resume_answers(
    resume: Sequence[core.ResumeEntry | Mapping[str, Any]],
) -> list[tuple[str, ApprovalDecision]]:
    """The answers in the ``resume`` entries of an AG-UI ``RunAgentInput``, as ``(call id,
    decision)`` pairs for ``SessionStore.answer`` / ``answer_request``.

    An entry's ``interruptId`` is the call id; ``status="cancelled"`` denies the call; a
    ``resolved`` entry's ``payload`` is our wire form without the id (``{"decision": "deny",
    "reason": ...}``), or ``{"approved": bool, "editedArgs"?: {...}, "reason"?: str}``.

    Raises:
        AnswerRefusedError: For an entry or payload of another form.
    """
    answers: list[tuple[str, ApprovalDecision]] = []
    for raw in resume:
        try:
            entry = raw if isinstance(raw, core.ResumeEntry) else core.ResumeEntry(**raw)
        except (TypeError, ValueError) as exc:
            raise AnswerRefusedError(f"not an AG-UI resume entry: {exc}") from None
        call_id = entry.interrupt_id
        if entry.status == "cancelled":
            answers.append((call_id, ApprovalDecision.deny("cancelled by the client")))
            continue
        payload = entry.payload
        if not isinstance(payload, Mapping):
            raise AnswerRefusedError(f"resume entry {call_id!r}: the payload is not an object")
        if "decision" in payload:
            _, answer = parse_answer({**payload, "request_id": call_id})
            if not isinstance(answer, ApprovalDecision):
                raise AnswerRefusedError(f"resume entry {call_id!r}: not an approval answer")
            answers.append((call_id, answer))
            continue
        approved, edited = payload.get("approved"), payload.get("editedArgs")
        if not isinstance(approved, bool):
            raise AnswerRefusedError(f"resume entry {call_id!r}: give decision or approved")
        if not approved:
            answers.append((call_id, ApprovalDecision.deny(str(payload.get("reason") or ""))))
        elif edited is not None:
            if not isinstance(edited, Mapping):
                raise AnswerRefusedError(f"resume entry {call_id!r}: editedArgs is no object")
            answers.append((call_id, ApprovalDecision.edit(edited)))
        else:
            answers.append((call_id, ApprovalDecision.approve()))
    return answers


async def agui_sse_stream(
    items: AsyncIterable[Any],
    adapter: AGUIAdapter | None = None,
) -> AsyncIterator[str]:
    """The AG-UI SSE stream (``ag_ui.encoder.EventEncoder``) of a call with
    ``enable_event=True`` or of a session's turn."""
    adapter = adapter or AGUIAdapter()
    encoder = EventEncoder()
    iterator = aiter(items)
    try:
        async for item in iterator:
            for event in adapter.convert(item):
                yield encoder.encode(event)
    finally:
        await close_source(iterator)
