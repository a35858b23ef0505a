"""The approval gate of one call, at the tool-execution boundary (see :mod:`._approval`).

The scheduler asks :func:`needs_gate` (two attribute reads: the hot path), then
:func:`approval_reason`, then waits in :func:`gate` for the answer, inside the call's own task.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import anyio

from .._events import ApprovalOutcome, ApprovalRequestEvent, ApprovalResolvedEvent
from .._messages import ToolCall
from ..tools import Tool
from ._approval import _OPEN, ApprovalDecision, Approver, Refusal, _Wait
from ._invocation import RunContext

__all__ = ["approval_reason", "gate", "needs_gate"]


def needs_gate(run: RunContext, tool: Tool) -> bool:
    """Whether a call of ``tool`` must be checked (the hot path: two attribute reads)."""
    return tool.requires_approval is not False or run.invocation.options.approval is not None


def approval_reason(run: RunContext, tool: Tool, arguments: Mapping[str, Any]) -> str | None:
    """Why the call needs approval (``None``: it does not); only after :func:`needs_gate`."""
    own = tool.requires_approval
    policy = run.invocation.options.approval
    try:
        verdict: bool | str | None = own(arguments) if callable(own) else own
        if not verdict and policy is not None:
            verdict = policy(tool, arguments)
    except Exception as exc:  # boundary: a failing policy asks (fails closed), never runs
        return f"the approval policy failed ({type(exc).__name__}: {exc})"
    if not verdict:
        return None
    return verdict if isinstance(verdict, str) else f"{tool.name} needs approval"


async def gate(
    run: RunContext, tool: Tool, call: ToolCall, arguments: dict[str, Any], reason: str
) -> dict[str, Any] | Refusal:
    """Ask for approval of the call (it needs it for ``reason``): the arguments to run it
    with (the model's, or the edited ones), or why it does not run."""
    options = run.invocation.options
    emitter = run.emitter
    request = ApprovalRequestEvent(
        call.id, call.name, dict(arguments), reason, emitter.origin.session_id,
        options.approval_timeout,
    )  # fmt: skip
    approver = options.approver
    if approver is None and not emitter.wants_events:
        text = f"Error: {call.name} needs approval ({reason}) and nobody can be asked; not run"
        await _resolved(run, call, "denied", "nobody to ask")
        return Refusal("ApprovalDenied", text)
    answer, outcome = await _wait(run, call, request, approver)
    if answer is None:
        await _resolved(run, call, outcome)
        if outcome == "cancelled":
            why = run.abort.reason if run.abort is not None else ""
            text = f"Error: the run was aborted ({why}) while {call.name} waited for approval"
            return Refusal("Cancelled", text + "; not run")
        text = f"Error: no answer to the approval request within {options.approval_timeout:g} s"
        return Refusal("ApprovalTimeout", text + f"; {call.name} was not run")
    if answer.decision == "deny":
        await _resolved(run, call, "denied", answer.reason)
        why = f": {answer.reason}" if answer.reason else ""
        return Refusal("ApprovalDenied", f"The user denied this call of {call.name}{why}")
    if answer.decision == "edit":
        edited = dict(answer.arguments or {})
        await _resolved(run, call, "edited", arguments=edited)
        return edited
    await _resolved(run, call, "approved")
    return arguments


async def _wait(
    run: RunContext, call: ToolCall, request: ApprovalRequestEvent, approver: Approver | None
) -> tuple[ApprovalDecision | None, ApprovalOutcome]:
    """Wait for the answer: ``(answer, "approved")``, or ``(None, "timeout" | "cancelled")``."""
    wait = _Wait()
    key = (request.session_id, call.id)
    pending = run.approvals
    pending[call.id] = wait
    _OPEN[key] = wait
    abort = run.abort
    remove = abort.add_callback(lambda _r: wait.done.set()) if abort is not None else None
    try:
        await run.emitter.event(request)
        with anyio.move_on_after(request.timeout_s):
            if approver is not None and not wait.done.is_set():
                wait.take(await _ask(approver, request))
            await wait.done.wait()
    finally:
        if remove is not None:
            remove()
        pending.pop(call.id, None)
        if _OPEN.get(key) is wait:
            del _OPEN[key]
    if wait.answer is not None:
        return wait.answer, "approved"
    if abort is not None and abort.aborted:
        return None, "cancelled"
    wait.done.set()  # a late answer is refused
    return None, "timeout"


async def _ask(approver: Approver, request: ApprovalRequestEvent) -> ApprovalDecision:
    """The approver's answer; one that fails or answers something else denies the call."""
    try:
        answer = approver(request)
        if inspect.isawaitable(answer):
            answer = await answer
    except Exception as exc:  # boundary: a failing approver denies, the run goes on
        return ApprovalDecision.deny(f"the approver failed ({type(exc).__name__}: {exc})")
    if not isinstance(answer, ApprovalDecision):
        return ApprovalDecision.deny(f"the approver returned {answer!r}, not a decision")
    return answer


async def _resolved(
    run: RunContext,
    call: ToolCall,
    outcome: ApprovalOutcome,
    reason: str = "",
    arguments: Mapping[str, Any] | None = None,
) -> None:
    if run.emitter.wants_events:
        event = ApprovalResolvedEvent(call.id, call.name, outcome, reason, arguments)
        await run.emitter.event(event)
