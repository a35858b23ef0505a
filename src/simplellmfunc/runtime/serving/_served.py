"""ServedAgent: one agent answering many remote callers, a turn at a time per session.

An ``@llm_chat`` function or an open :class:`~simplellmfunc.runtime.config.ConfiguredAgent`
runs turns with its events handed to a callback; the served agent keeps a history per session
(an A2A context), caps the number of sessions (least recently used idle ones go first, idle ones
are reclaimed after ``idle_timeout``) and of concurrent turns, aborts a session's turn by id, and
on :meth:`ServedAgent.aclose` aborts every running turn and waits for each to end with a valid
history (graceful shutdown).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import anyio

from ..._abort import AbortSignal
from ..._events import EventOrigin, EventYield
from ..._messages import history_to_dicts
from ...decorators import agent_name
from ...engine import Run, RunResult, new_call_id
from ...exceptions import CapacityError, UserError
from ..config import ConfiguredAgent, RunObserver, TurnResult

__all__ = ["OnEvent", "ServedAgent"]

OnEvent = Callable[[EventYield], Awaitable[None]]
"""Receives each event of a turn, in order."""


async def _ignore(item: EventYield) -> None:
    return None


class _Forward(RunObserver):
    def __init__(self, on_event: OnEvent) -> None:
        self._on_event = on_event

    async def event(self, item: EventYield) -> None:
        await self._on_event(item)


@dataclass(slots=True)
class _Session:
    history: list[dict[str, Any]] = field(default_factory=list)
    last_used: float = 0.0
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    abort: AbortSignal | None = None


class ServedAgent:
    """An agent served to remote callers (A2A, the OpenAI-compatible endpoint).

    Args:
        agent: An ``@llm_chat`` function, or an open ``ConfiguredAgent`` (the caller opens and
            closes it).
        name: The agent's public name (default: the function's or the config's name).
        description: What it does (default: the docstring's first line or the config's
            ``description``).
        max_sessions: Sessions kept at once; beyond it the least recently used idle session
            is dropped (all busy: :class:`~simplellmfunc.exceptions.CapacityError`).
        idle_timeout: Seconds after which an idle session is dropped (``None``: never).
        max_turns: Turns running at once; one more is refused with ``CapacityError``.

    Raises:
        UserError: If ``agent`` is neither an ``@llm_chat`` agent nor a ``ConfiguredAgent``.
    """

    def __init__(
        self,
        agent: Any,
        *,
        name: str | None = None,
        description: str | None = None,
        max_sessions: int = 100,
        idle_timeout: float | None = 3600.0,
        max_turns: int = 16,
    ) -> None:
        if isinstance(agent, ConfiguredAgent):
            default_name, default_text = agent.config.name, agent.config.description
        elif hasattr(agent, "prepare_call"):
            doc = (getattr(agent, "__doc__", None) or "").strip().splitlines()
            default_name, default_text = agent_name(agent), doc[0] if doc else ""
        else:
            raise UserError(f"{agent!r} is neither an @llm_chat agent nor a ConfiguredAgent")
        if max_sessions < 1 or max_turns < 1:
            raise UserError("max_sessions and max_turns must be at least 1")
        self.agent = agent
        self.name = name or default_name
        self.description = description or default_text or f"The agent {self.name!r}."
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.max_turns = max_turns
        self._sessions: dict[str, _Session] = {}
        self._running: dict[AbortSignal, anyio.Event] = {}
        self._closing = False

    # -- turns -------------------------------------------------------------------------------

    async def run_turn(
        self,
        text: str,
        history: Sequence[Mapping[str, Any]] = (),
        *,
        abort: AbortSignal | None = None,
        on_event: OnEvent | None = None,
        session_id: str = "",
    ) -> TurnResult:
        """Run one turn on ``text`` after ``history`` (kept nowhere: the caller holds it).

        Raises:
            CapacityError: If ``max_turns`` turns are running, or the agent is closing.
            ProviderError: When the model fails after retries.
        """
        if self._closing:
            raise CapacityError("the agent is shutting down", limit="closing")
        if len(self._running) >= self.max_turns:
            raise CapacityError(f"{self.max_turns} turns are running already", limit="turns")
        abort = abort or AbortSignal()
        ended = anyio.Event()
        self._running[abort] = ended
        try:
            return await self._turn(text, [dict(m) for m in history], abort, on_event, session_id)
        finally:
            del self._running[abort]
            ended.set()

    async def _turn(
        self,
        text: str,
        history: list[dict[str, Any]],
        abort: AbortSignal,
        on_event: OnEvent | None,
        session_id: str,
    ) -> TurnResult:
        on_event = on_event or _ignore
        if isinstance(self.agent, ConfiguredAgent):
            return await self.agent.run(
                text, abort=abort, observer=_Forward(on_event), history=history
            )
        invocation, transcript = await self.agent.prepare_call(text, history=history)
        origin = EventOrigin(session_id=session_id, agent_call_id=new_call_id())
        run = Run(invocation, transcript, abort=abort, user_input=text, events=True, origin=origin)
        result: RunResult | None = None
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                if isinstance(item, EventYield):
                    await on_event(item)
                elif isinstance(item, RunResult):
                    result = item
        assert result is not None  # a run always ends with its result
        return TurnResult(result.text, history_to_dicts(result.messages), result.terminated_by)

    async def session_turn(
        self,
        session_id: str,
        text: str,
        *,
        abort: AbortSignal | None = None,
        on_event: OnEvent | None = None,
    ) -> TurnResult:
        """Run one turn of session ``session_id`` (made on first use) and keep its history;
        turns of one session run one after the other.

        Raises:
            CapacityError: If every session is busy at ``max_sessions``, ``max_turns`` turns
                are running, or the agent is closing.
            ProviderError: When the model fails after retries.
        """
        session = self._session(session_id)
        async with session.lock:
            session.abort = abort = abort or AbortSignal()
            try:
                result = await self.run_turn(
                    text, session.history, abort=abort, on_event=on_event, session_id=session_id
                )
            finally:
                session.abort = None
                session.last_used = time.monotonic()
            session.history = result.history
            return result

    # -- sessions ----------------------------------------------------------------------------

    def history(self, session_id: str) -> list[dict[str, Any]]:
        """A copy of the session's history (empty for an unknown session)."""
        session = self._sessions.get(session_id)
        return [dict(m) for m in session.history] if session is not None else []

    @property
    def session_ids(self) -> list[str]:
        """The sessions kept now, least recently used first."""
        return list(self._sessions)

    def abort(self, session_id: str, reason: str = "aborted by user") -> bool:
        """Abort the session's running turn; whether one was running."""
        session = self._sessions.get(session_id)
        if session is None or session.abort is None:
            return False
        session.abort.abort(reason)
        return True

    def _session(self, session_id: str) -> _Session:
        now = time.monotonic()
        self._reclaim(now)
        session = self._sessions.pop(session_id, None)
        if session is None:
            if len(self._sessions) >= self.max_sessions:
                self._evict()
            session = _Session(last_used=now)
        self._sessions[session_id] = session  # the most recently used is last
        return session

    def _reclaim(self, now: float) -> None:
        if self.idle_timeout is None:
            return
        for key, session in list(self._sessions.items()):
            idle = now - session.last_used > self.idle_timeout
            if idle and not session.lock.locked():
                del self._sessions[key]

    def _evict(self) -> None:
        for key, session in self._sessions.items():
            if not session.lock.locked():
                del self._sessions[key]
                return
        raise CapacityError(
            f"all {self.max_sessions} sessions are busy; try again later", limit="sessions"
        )

    # -- shutdown ----------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """How many turns are running."""
        return len(self._running)

    async def aclose(self, reason: str = "the server is shutting down") -> None:
        """Refuse new turns, abort the running ones and wait until each has ended (each keeps
        a valid history)."""
        self._closing = True
        for abort, ended in list(self._running.items()):
            abort.abort(reason)
            await ended.wait()

    def __repr__(self) -> str:
        return (
            f"ServedAgent({self.name!r}, sessions={len(self._sessions)}, "
            f"running={len(self._running)})"
        )
