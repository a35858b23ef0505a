"""Durable waits for a person: a durable run's approval requests and their answers.

A call that waits for approval in a durable run is recorded as a step named
``approval:<tool>`` whose output is the request (:func:`asked_record`), at a step id reserved
with the call's own; any process reads the requests still waiting from the run's recorded
steps (:func:`waiting_requests`). The answer is a DBOS message on :data:`ANSWER_TOPIC` in the
answer's wire form (``{"request_id", "decision", "reason", "arguments"}``, see
``docs/wire.md``), sent by :meth:`DurableHandle.answer` or :meth:`DurableClient.answer` from
any process, before or after the process that ran the run died.

The run receives answers with ``DBOS.recv`` on that one topic, one receive at a time, and
hands each to the call it names (:class:`DurableWaits`): the receives are recorded in the
order they happened, and a re-executed attempt gets the same answers back in the same order,
whichever of its waiting calls asks first. Waiting holds no thread: ``DBOS.recv_async`` waits
on the event loop (a database check every few seconds, in a worker thread for the moment). A
run taken from a queue receives for ``park_after`` seconds, then parks (see :mod:`._parking`):
it gives its queue slot back until the answer resumes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import anyio
from dbos import DBOS

from ..._events import ApprovalRequestEvent
from ...engine import ApprovalDecision, parse_answer
from ...exceptions import AnswerRefusedError

__all__ = [
    "ANSWER_TOPIC",
    "DurableWaits",
    "answer_message",
    "asked_record",
    "waiting_requests",
]

ANSWER_TOPIC = "simplellmfunc.answer"
"""The DBOS message topic of the answers to a durable run's approval requests."""

ASK_PREFIX = "approval:"
_RECV = "DBOS.recv"
_RECEIVE_WINDOW_S = 3600.0  # one receive waits this long; then it is recorded empty, and again


class DurableWaits:
    """The answers a run has received, by request id, and the one receive in progress."""

    def __init__(self) -> None:
        self._answers: dict[str, ApprovalDecision] = {}
        self._receiving = anyio.Lock()
        self._window = _RECEIVE_WINDOW_S
        self._park: Callable[[], Awaitable[Any]] | None = None

    def park_after(self, seconds: float, park: Callable[[], Awaitable[Any]]) -> None:
        """Receive for ``seconds`` at a time; after each empty receive, call ``park`` (which
        returns a message received meanwhile, ``None``, or raises once the run is parked)."""
        self._window, self._park = seconds, park

    async def answer(self, request_id: str) -> ApprovalDecision:
        """The answer to ``request_id``, received (and recorded) when it comes."""
        while request_id not in self._answers:
            async with self._receiving:  # one receive at a time: their order is recorded
                if request_id in self._answers:
                    break
                message = await DBOS.recv_async(ANSWER_TOPIC, timeout_seconds=self._window)
                if message is None and self._park is not None:
                    message = await self._park()
                if message is None:
                    continue
                try:
                    answered, decision = parse_answer(message)
                except AnswerRefusedError:  # checked when sent; anything else is dropped
                    continue
                if isinstance(decision, ApprovalDecision):
                    self._answers.setdefault(answered, decision)  # the first answer counts
        return self._answers[request_id]


def asked_record(request: ApprovalRequestEvent) -> dict[str, Any]:
    """The recorded form of a request (the output of its ``approval:<tool>`` step)."""
    return {
        "request_id": request.tool_call_id,
        "tool_name": request.tool_name,
        "arguments": dict(request.arguments),
        "reason": request.reason,
        "session_id": request.session_id,
        "timeout_s": request.timeout_s,
    }


def answer_message(request_id: str, answer: ApprovalDecision) -> dict[str, Any]:
    """The message that answers ``request_id`` (the wire form, portable JSON).

    Raises:
        AnswerRefusedError: If ``answer`` is not an :class:`ApprovalDecision`.
    """
    if not isinstance(answer, ApprovalDecision):
        raise AnswerRefusedError(
            f"a durable run's approval is answered with an ApprovalDecision, got "
            f"{type(answer).__name__}"
        )
    message: dict[str, Any] = {"request_id": request_id, "decision": answer.decision}
    if answer.reason:
        message["reason"] = answer.reason
    if answer.arguments is not None:
        message["arguments"] = dict(answer.arguments)
    return message


def waiting_requests(steps: Iterable[Mapping[str, Any]]) -> list[ApprovalRequestEvent]:
    """The requests of a run still waiting for an answer, from its recorded steps (loaded
    with their outputs): recorded as asked, and no answer received for them yet."""
    asked: dict[str, Mapping[str, Any]] = {}
    answered: set[str] = set()
    for step in steps:
        name, output = str(step["function_name"]), step.get("output")
        if name.startswith(ASK_PREFIX) and isinstance(output, Mapping):
            asked[str(output["request_id"])] = output
        elif name == _RECV and isinstance(output, Mapping) and "request_id" in output:
            answered.add(str(output["request_id"]))
    return [
        ApprovalRequestEvent(
            str(record["request_id"]),
            str(record["tool_name"]),
            dict(record["arguments"]),
            str(record["reason"]),
            str(record["session_id"]),
            record["timeout_s"],
        )
        for request_id, record in asked.items()
        if request_id not in answered
    ]
