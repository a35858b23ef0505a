"""A2A ``input-required``: a turn that waits for a person, and the next message that answers.

When a turn of an A2A task asks a person (a tool approval, a PyRepl ``input()``), the executor
sets the task ``input-required`` with :func:`waiting_message` (what is asked, and how to answer)
and the waiting requests in the status metadata (``simplellmfunc.waiting``, each in its wire
form); the turn is parked in its session. The client's next message on that task is the answer
(:func:`answer_waiting`), and the executor follows the parked turn to its end (or to the next
wait).

The answer is the message's text, for the oldest waiting request: for an approval ``y`` /
``yes`` (approve), ``n <reason>`` (deny), ``e <json arguments>`` (edit), or the JSON wire form
(``{"decision": "deny", "reason": "..."}``, ``request_id`` optional); for an ``input()`` the
text is the value typed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..engine import APPROVAL_HELP, parse_answer, typed_decision
from ..exceptions import AnswerRefusedError
from ._session import Session
from ._waits import pending_request_id, wait_kind

__all__ = ["answer_waiting", "waiting_message"]

_ARGUMENTS_CHARS = 2_000


def waiting_message(waits: Sequence[Mapping[str, Any]]) -> str:
    """What the oldest waiting request asks, and how to answer it (the status message)."""
    if not waits:
        return "Nothing waits for an answer."
    wait = waits[0]
    more = f" ({len(waits) - 1} more request(s) wait after this one.)" if len(waits) > 1 else ""
    if wait_kind(wait) == "input":
        data = wait.get("data") or {}
        prompt = str(data.get("prompt") or "").strip() or "(no prompt)"
        return f"The code running in {wait.get('tool_name')} asks for input: {prompt}{more}"
    arguments = json.dumps(wait.get("arguments"), ensure_ascii=False)[:_ARGUMENTS_CHARS]
    reason = wait.get("reason") or "it needs approval"
    return (
        f"{wait.get('tool_name')} needs approval ({reason}), with arguments {arguments}. "
        f"Answer {APPROVAL_HELP}.{more}"
    )


def answer_waiting(session: Session, text: str) -> str:
    """Answer the oldest request ``session``'s turn waits for with a message's ``text``;
    the id of the request answered.

    Raises:
        AnswerRefusedError: If nothing waits, or the text is not an answer to the approval.
        InputRefusedError: If the ``input()`` request cannot take it any more.
    """
    waits = session.pending()
    if not waits:
        raise AnswerRefusedError(f"session {session.id!r}: nothing waits for an answer")
    wait = waits[0]
    request_id = pending_request_id(wait)
    if wait_kind(wait) == "input":
        session.answer(request_id, text)
        return request_id
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            raise AnswerRefusedError(f"the answer is not JSON: {exc}") from None
        if isinstance(data, dict):
            data.setdefault("request_id", request_id)
        request_id, answer = parse_answer(data)
    else:
        answer = typed_decision(stripped)
    session.answer(request_id, answer)
    return request_id
