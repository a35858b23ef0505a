"""Tool approval: calls that wait for a person's yes before they run.

A call needs approval when its tool says so (``@tool(requires_approval=True)``, or a callable
over the arguments) or the run's :attr:`EngineOptions.approval` policy says so (a callable that
sees the tool and the arguments). Such a call is not run: the scheduler calls :func:`gate` at
the tool-execution boundary, inside the call's own task, so its siblings in the batch run on
while it waits. The run emits an :class:`ApprovalRequestEvent` and waits for an
:class:`ApprovalDecision` by call id (:meth:`Run.answer`, :func:`answer_request`,
``SessionStore.answer``), or asks the options' ``approver`` itself (a plain call, which has no
event consumer to answer). A denial, a timeout and an abort become tool results the model reads
(the call was not run); an edit runs the call with the new arguments and says so in its result.

The answer's wire form (one JSON object for approvals and for PyRepl ``input()``) is read by
:func:`parse_answer`; see ``docs/wire.md``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias
from weakref import WeakValueDictionary

import anyio

from .._events import ApprovalOutcome, ApprovalRequestEvent, ApprovalResolvedEvent
from .._messages import ToolCall
from ..exceptions import AnswerRefusedError
from ..tools import Tool

if TYPE_CHECKING:
    from ._invocation import RunContext

__all__ = [
    "ApprovalDecision",
    "ApprovalPolicy",
    "Approver",
    "Refusal",
    "answer_request",
    "approval_reason",
    "gate",
    "needs_gate",
    "parse_answer",
]

ApprovalPolicy: TypeAlias = Callable[[Tool, Mapping[str, Any]], bool | str | None]
"""Decides per call: falsy runs it, ``True`` (or a reason string) makes it wait for approval."""

DecisionKind = Literal["approve", "deny", "edit"]


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A person's answer to an approval request.

    Build it with :meth:`approve`, :meth:`deny` or :meth:`edit`.

    Attributes:
        decision: ``"approve"``, ``"deny"`` or ``"edit"`` (approve with new arguments).
        reason: Why it was denied (the model reads it).
        arguments: The edited arguments (``"edit"`` only).
    """

    decision: DecisionKind
    reason: str = ""
    arguments: Mapping[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if self.decision not in ("approve", "deny", "edit"):
            raise AnswerRefusedError(
                f"decision must be 'approve', 'deny' or 'edit', got {self.decision!r}"
            )
        if (self.decision == "edit") != isinstance(self.arguments, Mapping):
            raise AnswerRefusedError("an 'edit' answer (and only one) carries an arguments object")

    @classmethod
    def approve(cls) -> ApprovalDecision:
        """Run the call as the model wrote it."""
        return cls("approve")

    @classmethod
    def deny(cls, reason: str = "") -> ApprovalDecision:
        """Do not run the call; the model reads ``reason``."""
        return cls("deny", str(reason))

    @classmethod
    def edit(cls, arguments: Mapping[str, Any]) -> ApprovalDecision:
        """Run the call with ``arguments`` instead of the model's."""
        return cls("edit", "", dict(arguments))


Approver: TypeAlias = Callable[
    [ApprovalRequestEvent], ApprovalDecision | Awaitable[ApprovalDecision]
]
"""Answers requests in the run itself (a terminal prompt, a plain call with nobody to ask)."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A call that will not run: the error type and the text the model reads."""

    error_type: str
    text: str


class _Wait:
    """One pending request: its answer lands here and sets the event."""

    __slots__ = ("__weakref__", "answer", "done")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.answer: ApprovalDecision | None = None

    def take(self, answer: ApprovalDecision) -> bool:
        if self.done.is_set():
            return False
        self.answer = answer
        self.done.set()
        return True


# Every pending approval of the process, by (session id, call id): a front end that shows a
# run's events answers through answer_request with the event's ids.
_OPEN: WeakValueDictionary[tuple[str, str], _Wait] = WeakValueDictionary()


def answer_request(
    request_id: str, answer: ApprovalDecision | str, *, session_id: str = ""
) -> None:
    """Answer a waiting request of this process: an approval (``ApprovalDecision``) by its
    call id and session id, or a PyRepl ``input()`` request (a string) by its request id.

    Raises:
        AnswerRefusedError: If no request of that kind waits under that id (answered, timed
            out, ended, unknown).
        InputRefusedError: If the ``input()`` request cannot take the value.
    """
    if isinstance(answer, str):
        from ..builtin.pyrepl._input import submit_kernel_input  # only input() needs PyRepl

        if not submit_kernel_input(request_id, answer):
            raise AnswerRefusedError(f"no input() request {request_id!r} is waiting")
        return
    wait = _OPEN.get((session_id, request_id))
    if wait is None or not wait.take(answer):
        where = f" in session {session_id!r}" if session_id else ""
        raise AnswerRefusedError(f"no approval request {request_id!r} is waiting{where}")


def answer_pending(pending: Mapping[str, _Wait], request_id: str, answer: ApprovalDecision) -> None:
    """Answer the request ``request_id`` of one run (``Run.answer``).

    Raises:
        AnswerRefusedError: If the run has no such request waiting.
    """
    wait = pending.get(request_id)
    if wait is None or not wait.take(answer):
        raise AnswerRefusedError(f"no approval request {request_id!r} is waiting in this run")


def parse_answer(data: object) -> tuple[str, ApprovalDecision | str]:
    """Read one answer in its wire form: the request id and the answer.

    ``{"request_id": id, "decision": "approve"}``, ``{"request_id": id, "decision": "deny",
    "reason": "..."}``, ``{"request_id": id, "decision": "edit", "arguments": {...}}`` for an
    approval; ``{"request_id": id, "value": "..."}`` for a PyRepl ``input()`` request.

    Raises:
        AnswerRefusedError: For anything else (the message says what is wrong).
    """
    if not isinstance(data, Mapping):
        raise AnswerRefusedError("an answer is a JSON object")
    request_id = data.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        raise AnswerRefusedError("an answer needs a non-empty string request_id")
    extra = sorted(set(data) - {"request_id", "decision", "reason", "arguments", "value"})
    if extra:
        raise AnswerRefusedError(f"unknown answer field(s): {', '.join(extra)}")
    if "value" in data:
        value = data["value"]
        if not isinstance(value, str) or "decision" in data:
            raise AnswerRefusedError("an input() answer is {request_id, value: string}")
        return request_id, value
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise AnswerRefusedError("reason must be a string")
    arguments = data.get("arguments")
    if arguments is not None and not isinstance(arguments, Mapping):
        raise AnswerRefusedError("arguments must be a JSON object")
    return request_id, ApprovalDecision(data.get("decision"), reason, arguments)  # type: ignore[arg-type]


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


def edited_note(arguments: Mapping[str, Any]) -> str:
    """The line put before an edited call's result, so the model knows what ran."""
    return f"(The user edited the arguments before it ran: {json.dumps(dict(arguments))})\n"
