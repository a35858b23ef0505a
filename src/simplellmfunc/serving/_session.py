"""One session: a user's history, PyRepl kernel, SelfReference key, turn and last use."""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import anyio

from .._abort import AbortSignal
from ..engine import ApprovalDecision, answer_request
from ..exceptions import AnswerRefusedError, InputRefusedError, SessionError
from ._waits import track_wait

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

    from ..builtin import PyRepl

__all__ = ["Session", "check_session_id"]

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_session_id(session_id: object) -> str:
    """``session_id`` if it is a usable id (letters, digits, ``_.-``, up to 128 characters).

    Raises:
        SessionError: For anything else (ids become folder names and store namespaces).
    """
    if not isinstance(session_id, str) or _ID.fullmatch(session_id) is None:
        raise SessionError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits or _.- "
            "(starting with a letter or digit)",
            reason="invalid_id",
        )
    return session_id


class Session:
    """The state of one conversation, kept by a :class:`SessionStore`.

    Attributes:
        id: The session id (also ``EventOrigin.session_id`` of its events).
        history: The conversation so far (chat dicts), valid for the next turn.
        repl: The session's PyRepl (``None`` when the store runs no kernels).
        self_reference_key: The SelfReference memory key of this session.
        last_used: ``time.monotonic()`` of the last turn's end (or of the creation).
    """

    def __init__(
        self,
        session_id: str,
        history: list[dict[str, Any]],
        repl: PyRepl | None,
        self_reference_key: str,
    ) -> None:
        self.id = session_id
        self.history = history
        self.repl = repl
        self.self_reference_key = self_reference_key
        self.last_used = time.monotonic()
        self.turns = 0
        self.abort_signal: AbortSignal | None = None
        self._idle = anyio.Event()
        self._idle.set()
        self._cancel: anyio.CancelScope | None = None
        self.closed = False
        #: What the running turn waits for a person to answer, by request id (wire form).
        self.waits: dict[str, dict[str, Any]] = {}
        #: The running turn's message (its first argument, when a string), for a front that
        #: redraws a turn it left while the turn waited.
        self.turn_message: str | None = None
        #: The running turn's items while nobody follows it (its consumer left while waiting).
        self.parked: MemoryObjectReceiveStream[Any] | None = None

    @property
    def busy(self) -> bool:
        """Whether a turn is running."""
        return not self._idle.is_set()

    def idle_for(self, now: float | None = None) -> float:
        """Seconds since the last turn ended (0 while one runs)."""
        if self.busy:
            return 0.0
        return (time.monotonic() if now is None else now) - self.last_used

    def abort(self, reason: str = "aborted by user") -> bool:
        """Abort the running turn (it ends with a valid history); False when none runs."""
        if not self.busy or self.abort_signal is None:
            return False
        self.abort_signal.abort(reason)
        return True

    def submit_input(self, request_id: str, value: str) -> None:
        """Answer the kernel's ``input()`` request ``request_id`` with ``value``.

        Raises:
            InputRefusedError: If the request timed out, was answered, ended or is unknown.
            SessionError: If the session has no kernel.
        """
        if self.repl is None:
            raise SessionError(
                f"session {self.id!r} has no PyRepl kernel to answer input()", reason="no_kernel"
            )
        try:
            self.repl.answer_input(request_id, value)
        except InputRefusedError as exc:
            raise InputRefusedError(f"session {self.id!r}: {exc}") from None

    def answer(self, request_id: str, answer: ApprovalDecision | str) -> None:
        """Answer what this session's running turn waits for: a tool approval (an
        :class:`ApprovalDecision`, by call id) or the kernel's ``input()`` (a string, by the
        ``kernel_input_request``'s id). ``parse_answer`` reads both from their wire form.

        Raises:
            AnswerRefusedError: If no approval request waits under that id.
            InputRefusedError: If the ``input()`` request timed out, was answered or ended.
            SessionError: If the session has no kernel (an ``input()`` answer).
        """
        if isinstance(answer, str):
            self.submit_input(request_id, answer)
            self.waits.pop(request_id, None)
            return
        try:
            answer_request(request_id, answer, session_id=self.id)
        except AnswerRefusedError as exc:
            raise AnswerRefusedError(f"session {self.id!r}: {exc}") from None

    async def wait_idle(self) -> None:
        """Wait until the running turn (if any) has ended and its history is kept."""
        await self._idle.wait()

    def info(self) -> dict[str, Any]:
        """A JSON-safe summary (for an admin endpoint or a log line)."""
        return {
            "id": self.id,
            "busy": self.busy,
            "turns": self.turns,
            "messages": len(self.history),
            "idle_seconds": round(self.idle_for(), 3),
            "kernel": self.repl is not None and self.repl.is_running,
        }

    # -- used by the store and the turn ---------------------------------------------------

    def begin(self) -> AbortSignal:
        """Mark a turn as running; its abort signal.

        Raises:
            SessionError: If a turn is already running, or the session was closed.
        """
        if self.closed:
            raise SessionError(f"session {self.id!r} is closed", reason="closed")
        if self.busy:
            raise SessionError(
                f"session {self.id!r} is already running a turn: wait for it, or abort it",
                reason="busy",
            )
        self._idle = anyio.Event()
        self.abort_signal = AbortSignal()
        return self.abort_signal

    def pending(self) -> list[dict[str, Any]]:
        """What the running turn waits for a person to answer, oldest first: each request's
        event in its wire form (an ``approval_request``, or a ``kernel_input_request``)."""
        return [dict(w) for w in self.waits.values()]

    def track(self, item: object) -> None:
        """Note what an item of the running turn asks a person for, or stops asking."""
        track_wait(self.waits, item)

    def end(self, history: list[dict[str, Any]] | None) -> None:
        """Mark the turn as ended, keeping ``history`` when the turn produced one."""
        self.waits.clear()
        self.turn_message = None
        parked, self.parked = self.parked, None
        if parked is not None:
            parked.close()
        if history is not None:
            self.history = history
            self.turns += 1
        self.last_used = time.monotonic()
        self.abort_signal = None
        self._cancel = None
        self._idle.set()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "busy" if self.busy else "idle"
        return f"<Session {self.id} {state} messages={len(self.history)}>"
