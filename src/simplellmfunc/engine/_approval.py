"""Tool approval: calls that wait for a person's yes before they run.

A call needs approval when its tool says so (``@tool(requires_approval=True)``, or a callable
over the arguments) or the run's :attr:`EngineOptions.approval` policy says so (a callable that
sees the tool and the arguments). Such a call is not run: the scheduler calls ``_gate.gate`` at
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

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias
from weakref import WeakValueDictionary

import anyio

from .._events import ApprovalRequestEvent
from ..exceptions import AnswerRefusedError
from ..tools import Tool

__all__ = [
    "APPROVAL_HELP",
    "ApprovalDecision",
    "ApprovalPolicy",
    "Approver",
    "Refusal",
    "answer_pending",
    "answer_request",
    "edited_note",
    "parse_answer",
    "typed_decision",
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


def answer_request(request_id: str, answer: ApprovalDecision, *, session_id: str = "") -> None:
    """Answer a waiting approval request of this process by its call id and session id.

    A PyRepl ``input()`` request is answered where its kernel is: ``SessionStore.answer`` /
    ``Session.answer`` (the one answer API for both kinds of wait) or ``PyRepl.answer_input``.

    Raises:
        AnswerRefusedError: If no approval waits under that id (answered, timed out, ended,
            unknown), or ``answer`` is not an :class:`ApprovalDecision`.
    """
    if not isinstance(answer, ApprovalDecision):
        raise AnswerRefusedError(
            f"answer_request takes an ApprovalDecision, got {type(answer).__name__}: an input() "
            "answer goes to SessionStore.answer or PyRepl.answer_input"
        )
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


def edited_note(arguments: Mapping[str, Any]) -> str:
    """The line put before an edited call's result, so the model knows what ran."""
    return f"(The user edited the arguments before it ran: {json.dumps(dict(arguments))})\n"


#: How to type an answer to an approval (see :func:`typed_decision`).
APPROVAL_HELP = "y: approve · n <reason>: deny · e <json arguments>: edit"


def typed_decision(text: str) -> ApprovalDecision:
    """An approval answer typed as text (the terminal chat's prompt, an A2A message): ``y``
    (approve), ``n <reason>`` (deny) or ``e <json object>`` (edit).

    Raises:
        AnswerRefusedError: For anything else (the message says what to type).
    """
    word, _, rest = text.strip().partition(" ")
    word = word.lower()
    if word in ("y", "yes", "a", "approve"):
        return ApprovalDecision.approve()
    if word in ("n", "no", "d", "deny"):
        return ApprovalDecision.deny(rest.strip())
    if word in ("e", "edit"):
        try:
            arguments = json.loads(rest)
        except ValueError as exc:
            raise AnswerRefusedError(f"the edited arguments are not JSON: {exc}") from None
        if not isinstance(arguments, dict):
            raise AnswerRefusedError("the edited arguments must be a JSON object")
        return ApprovalDecision.edit(arguments)
    raise AnswerRefusedError(f"answer the approval with {APPROVAL_HELP}")
