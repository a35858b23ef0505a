"""ServedAgent: one agent answering remote callers, on a :class:`SessionStore`.

The sessions (history persisted through a runtime store, a PyRepl kernel per session from the
warm pool, abort by id, idle reclaim, the session limit) are the store's; the served agent adds
what the HTTP protocols need on top: a public name and description (the A2A card, the OpenAI
model), a cap on concurrent turns, stateless turns (the caller holds the conversation: a
throwaway session seeded with it), one door for every front (:meth:`ServedAgent.turn`: the
turn's events, then a :class:`TurnResult`), and a graceful shutdown that refuses new turns and
aborts the running ones.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from .._events import EventYield, ReactEndEvent, ResponseYield
from .._resource import AsyncResource
from ..decorators import ChatAgent, LLMFunction
from ..engine import RunHook, answer_deferred, pending_calls
from ..exceptions import CapacityError, SessionError, UserError
from ..runtime.config import ConfiguredAgent, ServeLimits, TurnResult
from ..runtime.stores import Store
from ._agents import AgentTurn, CallableAgent, DrivenTurn, SessionAgent, chat_pair
from ._store import SessionStore

__all__ = ["ServedAgent", "TurnRequest"]

logger = logging.getLogger("simplellmfunc.serving")

_CLOSE_WAIT = 30.0  # how long a shutdown waits for an aborted turn to end
_SUPERSEDED = "Cancelled: the user sent a new message instead of this tool's result."


@dataclass(frozen=True, slots=True)
class TurnRequest:
    """One turn asked of a :class:`ServedAgent` (see :meth:`ServedAgent.turn`).

    Attributes:
        text: The user's message; ``None``: continue the conversation as it is (it ends with
            the user's message, or with the results of the client's tool calls).
        session_id: The session (opened on first use; the server keeps its history);
            ``None``: a stateless turn on ``history``, in a session of its own.
        history: The conversation so far, for a stateless turn.
        hooks: Run hooks of this turn only (a :class:`ClientHook`: what an API client brings).
        results: The client's result of each pending call of the session, by call id (a new
            message instead answers them as cancelled).
        principal: Who asks (a principal's name, :attr:`Principal.name`): its turns and
            sessions count toward the ``ServeLimits`` caps per principal.
    """

    text: str | None
    session_id: str | None = None
    history: Sequence[Mapping[str, Any]] = ()
    hooks: Sequence[RunHook] = ()
    results: Mapping[str, Any] | None = None
    principal: str = ""


class ServedAgent(AsyncResource):
    """An agent served to remote callers (A2A, the OpenAI-compatible endpoint, the web page,
    the terminal chat).

    Use it as an async context manager (an :class:`~simplellmfunc._resource.AsyncResource`:
    :meth:`open` opens its :class:`SessionStore`, :meth:`aclose` stops the running turns and
    closes it); ``create_app``, ``a2a_app`` and ``web_chat_app`` open it for the app's
    lifetime when it is not open yet. :meth:`around` serves a store someone else opens and
    closes.

    Args:
        agent: An ``@llm_chat`` function, an open ``ConfiguredAgent`` (the caller opens and
            closes it), any :class:`SessionAgent`, or a function taken as a
            :class:`CallableAgent` (the terminal chat's; it takes no images). The items of
            an agent that are neither events nor its answer (a plain function's text) pass
            through the door as they are.
        name: The agent's public name (default: the function's or the config's name).
        description: What it does (default: the docstring's first line or the config's
            ``description``).
        limits: Sessions, running turns, idle timeout and kernel pool
            (:class:`~simplellmfunc.runtime.config.ServeLimits`; the defaults are its own).
            All sessions busy at ``max_sessions``, ``max_turns`` turns running, or a
            principal at its own cap (``max_turns_per_principal``,
            ``max_sessions_per_principal``): :class:`~simplellmfunc.exceptions.CapacityError`.
        pyrepl: Give each session its own PyRepl kernel (``True`` or PyRepl options; the
            pool of ``limits.pool_size`` kernels is started only then).
        store: Where session histories are kept (default: in memory).
        root: The sessions' folder (kernels' working directories; default: temporary).
        client_tools: Let API clients bring their own tools (run client-side, see
            :class:`ClientTurn`); ``False``: a request with tools is refused.

    Raises:
        UserError: If ``agent`` is neither an ``@llm_chat`` agent, a ``ConfiguredAgent``, a
            :class:`SessionAgent` nor a function (an ``@llm_function`` is no chat agent).
    """

    def __init__(
        self,
        agent: ChatAgent | ConfiguredAgent | SessionAgent | Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        limits: ServeLimits | None = None,
        pyrepl: bool | Mapping[str, Any] = False,
        store: Store | None = None,
        root: str | Path | None = None,
        client_tools: bool = True,
    ) -> None:
        known = isinstance(agent, ChatAgent | ConfiguredAgent | SessionAgent)
        if not known and (not callable(agent) or isinstance(agent, LLMFunction)):
            raise UserError(
                f"{agent!r} is neither an @llm_chat agent, a ConfiguredAgent, a SessionAgent "
                "nor a function"
            )
        limits = limits or ServeLimits()
        default_name = _name_of(agent)
        sessions = SessionStore(
            _session_agent(agent),
            pyrepl=pyrepl,
            root=root,
            pool_size=limits.pool_size if pyrepl is not False else 0,
            store=store,
            agent_name=_namespace_name(name or default_name),
            idle_timeout=limits.idle_timeout,
            max_sessions=limits.max_sessions,
        )
        self._setup(agent, sessions, name, description, limits, client_tools, owns=True)

    @classmethod
    def around(
        cls,
        sessions: SessionStore,
        *,
        name: str | None = None,
        description: str | None = None,
        limits: ServeLimits | None = None,
        client_tools: bool = True,
    ) -> ServedAgent:
        """A served agent on ``sessions``, a store its caller opens and closes (an app
        mounted in another one, whose lifespan opens the store): its turns go through the
        same door (admitted under ``limits``' turn caps; the store keeps its own
        ``max_sessions`` and ``idle_timeout``). It admits turns while the store is open;
        :meth:`aclose` stops the running turns and leaves the store open.
        """
        served = cls.__new__(cls)
        agent = _served_agent(sessions.agent)
        served._setup(
            agent, sessions, name, description, limits or ServeLimits(), client_tools, owns=False
        )
        return served

    def _setup(
        self,
        agent: Any,
        sessions: SessionStore,
        name: str | None,
        description: str | None,
        limits: ServeLimits,
        client_tools: bool,
        *,
        owns: bool,
    ) -> None:
        self.agent = agent
        self.name = name or _name_of(agent)
        self.description = description or _description_of(agent) or f"The agent {self.name!r}."
        self.limits = limits
        self.client_tools = client_tools
        self.sessions = sessions
        self._owns = owns  # whether open() / aclose() open and close the store
        self._vision: bool | None = None
        self._running = 0
        self._running_by: Counter[str] = Counter()  # running turns per principal
        self._owners: dict[str, str] = {}  # session id -> the principal whose it is
        self._closing = False
        self._closers: list[Callable[[], Awaitable[None]]] = []  # fronts' (see on_close)

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether turns are admitted: the sessions are open and the agent is not stopping."""
        return self.sessions.is_open and not self._closing

    async def open(self) -> None:
        """Open the sessions (``async with`` does; a store of :meth:`around` is its owner's
        to open: this only admits turns again after :meth:`stop`).

        Raises:
            UserError: If the served agent is open already.
        """
        if self._owns:
            if self.sessions.is_open:
                raise UserError("the served agent is open already")
            await self.sessions.open()
        self._closing = False

    async def aclose(self) -> None:
        """Stop (:meth:`stop`), close what the fronts registered (:meth:`on_close`), then
        close the sessions unless the store is its owner's (idempotent; leaving ``async
        with`` does this)."""
        await self.stop()
        await self._close_fronts()
        if self._owns:
            await self.sessions.aclose()

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Have ``closer`` awaited when the agent closes, or its app's lifespan ends, after
        the running turns ended: what a front holds beyond its turns (the A2A SDK's
        background tasks of each task). ``closer`` may be called more than once."""
        self._closers.append(closer)

    async def _close_fronts(self) -> None:
        with anyio.CancelScope(shield=True):
            for closer in self._closers:
                try:
                    await closer()
                except Exception:  # boundary: one front's failure must not keep the rest open
                    logger.warning("a front of %r failed to close", self.name, exc_info=True)

    async def stop(self, reason: str = "the server is shutting down") -> None:
        """Refuse new turns, abort the running ones and wait until each has ended (each keeps
        a valid history); the sessions stay open and readable until :meth:`aclose`. A server
        does this before it waits for its connections to close."""
        self._closing = True
        await self.sessions.abort_running(reason, wait=_CLOSE_WAIT)

    @asynccontextmanager
    async def lifespan(self, app: object = None) -> AsyncIterator[None]:
        """A Starlette ``lifespan``: opens the agent for the app's lifetime unless it is open
        already (then its owner closes it, and the lifespan's end only :meth:`stop` s it and
        closes what the fronts registered, :meth:`on_close`)."""
        if self._owns and not self.sessions.is_open:
            async with self:
                yield
            return
        if not self._owns:
            await self.open()  # admits turns (again); the store is its owner's
        try:
            yield
        finally:
            await self.stop()
            await self._close_fronts()

    # -- turns ---------------------------------------------------------------------------------

    async def turn(self, request: TurnRequest) -> AsyncGenerator[Any, None]:
        """The one door: one turn, as its events (:class:`EventYield`; a plain function
        agent's own items as they are) and then a :class:`TurnResult` (last).

        It admits the turn (refused while closing or with ``max_turns`` running), counts it
        while it runs, opens or reuses its session (``request.session_id``; ``None``: a
        throwaway session seeded with ``request.history``, forgotten at the end), answers a
        deferred turn's pending calls, streams the turn and releases it. Leaving early (a
        client disconnect) ends the turn like an abort: the session keeps a valid history.
        Every front (OpenAI chat and responses, A2A, the web page, AG-UI) adapts this.

        Raises:
            CapacityError: If every session is busy at ``max_sessions``, ``max_turns`` turns
                are running, or the agent is closing (on the first iteration).
            SessionError: For an invalid id, or a session already running a turn.
            InvalidHistoryError: If ``request.results`` do not answer the pending calls.
            ProviderError: When the model fails after retries.
        """
        principal = request.principal
        self._admit(principal)
        stateless = request.session_id is None
        session_id = request.session_id or f"once-{os.urandom(8).hex()}"
        self._claim(principal, session_id)
        self._running += 1
        self._running_by[principal] += 1
        try:
            if stateless:
                await self._open_session(session_id, request.history)
            else:
                await self._continue(session_id, request.results)
            answer: Any = None
            texts: list[str] = []  # an @llm_chat function without events: its (text, history)
            history: list[dict[str, Any]] | None = None
            ended = "answer"
            chat = self.sessions.chat(session_id, request.text, hooks=request.hooks)
            async with aclosing(chat) as items:
                async for item in items:
                    if isinstance(item, EventYield):
                        if isinstance(item.event, ReactEndEvent):
                            ended = item.event.terminated_by
                        yield item
                    elif isinstance(item, ResponseYield):
                        answer, history = item.response, list(item.messages)
                    else:  # a plain function's own items (its text)
                        pair = chat_pair(item)
                        if pair is not None and isinstance(pair[0], str):
                            texts.append(pair[0])
                        yield item
            if answer is None:  # the deltas (streamed) or the whole reply of the pairs
                answer = "".join(texts)
            if history is None:
                history = await self.sessions.history(session_id)
            yield TurnResult(str(answer), history, ended)
        finally:
            self._running -= 1
            self._running_by[principal] -= 1
            if not self._running_by[principal]:
                del self._running_by[principal]
            if stateless:
                self._owners.pop(session_id, None)
                await self.sessions.close_session(session_id, forget=True)

    async def _continue(self, session_id: str, results: Mapping[str, Any] | None) -> None:
        """Open the session, refuse it busy, and answer its pending client calls (with
        ``results``, else as superseded by the new message)."""
        await self._open_session(session_id)
        session = self.sessions.get(session_id)
        if session.busy:
            raise SessionError(
                f"session {session_id!r} is already running a turn: wait for it, or abort it",
                reason="busy",
            )
        pending = pending_calls(session.history)
        if results is not None or pending:
            answers = (
                results
                if results is not None
                else dict.fromkeys((c.id for c in pending), _SUPERSEDED)
            )
            session.history = answer_deferred(session.history, answers)

    def admit(self, session_id: str | None = None, principal: str = "") -> None:
        """Raise now what a turn (of ``session_id``; ``None``: a stateless one; asked by
        ``principal``) would be refused with, e.g. before a streamed response commits to
        HTTP 200.

        Raises:
            CapacityError: If the agent is closing, ``max_turns`` turns are running, or
                ``principal`` is at one of its caps.
            SessionError: If the session is running a turn already.
        """
        self._admit(principal)
        self._check_sessions(principal, session_id)
        session = self.sessions.sessions.get(session_id) if session_id is not None else None
        if session is not None and session.busy:
            raise SessionError(
                f"session {session_id!r} is already running a turn: wait for it, or abort it",
                reason="busy",
            )

    def _admit(self, principal: str) -> None:
        if not self.is_open:
            state = "shutting down" if self._closing else "not open"
            raise CapacityError(f"the agent is {state}", limit="closing")
        if self._running >= self.limits.max_turns:
            raise CapacityError(f"{self.limits.max_turns} turns are running already", limit="turns")
        cap = self.limits.max_turns_per_principal
        if cap is not None and self._running_by[principal] >= cap:
            raise CapacityError(
                f"{cap} turns of yours are running already: wait for one to end",
                limit="principal_turns",
            )

    def _check_sessions(self, principal: str, session_id: str | None) -> None:
        """Refuse a new session to a principal at ``max_sessions_per_principal``."""
        cap = self.limits.max_sessions_per_principal
        if cap is None or (session_id is not None and self._owners.get(session_id) == principal):
            return
        open_ids = self.sessions.sessions
        for sid in [s for s in self._owners if s not in open_ids and s != session_id]:
            del self._owners[sid]  # closed (reclaimed, forgotten) since
        if sum(owner == principal for owner in self._owners.values()) >= cap:
            raise CapacityError(
                f"{cap} sessions of yours are open already: end one, or wait until it is reclaimed",
                limit="principal_sessions",
            )

    def _claim(self, principal: str, session_id: str) -> None:
        """Count ``session_id`` as ``principal``'s (refused beyond its session cap)."""
        self._check_sessions(principal, session_id)
        self._owners.setdefault(session_id, principal)

    async def _open_session(
        self, session_id: str, history: Sequence[Mapping[str, Any]] | None = None
    ) -> None:
        try:
            await self.sessions.open_session(session_id, history=history)
        except SessionError as exc:
            if exc.reason == "full":
                raise CapacityError(str(exc), limit="sessions") from None
            raise

    async def takes_images(self) -> bool:
        """Whether the agent's model takes images (its provider's ``vision`` capability)."""
        if self._vision is None:
            agent = self.agent
            if isinstance(agent, ChatAgent | ConfiguredAgent):
                self._vision = bool(agent.llm.capabilities.vision)
            else:
                self._vision = False
        return self._vision

    # -- sessions ------------------------------------------------------------------------------

    async def history(self, session_id: str) -> list[dict[str, Any]]:
        """A copy of the session's history (the stored one once it is closed; empty for an
        unknown session)."""
        return await self.sessions.history(session_id)

    @property
    def session_ids(self) -> list[str]:
        """The sessions open now (stateless turns' throwaway sessions included)."""
        return list(self.sessions.sessions)

    def abort(self, session_id: str, reason: str = "aborted by user") -> bool:
        """Abort the session's running turn; whether one was running."""
        session = self.sessions.sessions.get(session_id)
        return session is not None and session.abort(reason)

    @property
    def max_turns(self) -> int:
        """Turns running at once at most (``limits.max_turns``)."""
        return self.limits.max_turns

    @property
    def running(self) -> int:
        """How many turns are running."""
        return self._running

    def __repr__(self) -> str:
        return f"ServedAgent({self.name!r}, sessions={len(self.sessions)}, running={self._running})"


def _name_of(agent: Any) -> str:
    """The default public name: the ``@llm_chat`` function's or the config's; ``"agent"``."""
    if isinstance(agent, ConfiguredAgent):
        return agent.config.name
    if isinstance(agent, ChatAgent):
        return agent.name
    return "agent"


def _description_of(agent: Any) -> str | None:
    if isinstance(agent, ConfiguredAgent):
        return agent.config.description
    if isinstance(agent, ChatAgent):
        return agent.description
    return None


def _session_agent(agent: Any) -> SessionAgent:
    """What the store hands the turns to: an engine-run adapter for ``@llm_chat`` and config
    agents, a :class:`SessionAgent` as it is, a function as a :class:`CallableAgent`."""
    if isinstance(agent, ChatAgent | ConfiguredAgent):
        return _ChatTurns(agent)
    if isinstance(agent, SessionAgent):
        return agent
    return CallableAgent(agent)


def _served_agent(agent: SessionAgent) -> Any:
    """The agent a store's session agent serves (for its name, description and vision)."""
    if isinstance(agent, _ChatTurns):
        return agent.agent
    if isinstance(agent, CallableAgent) and isinstance(agent.function, ChatAgent):
        return agent.function
    return agent


def _namespace_name(name: str) -> str:
    """The agent's name as a store namespace part (letters, digits, ``_.-``)."""
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name).strip("_.-")
    return cleaned[:128] or "agent"


class _ChatTurns:
    """An ``@llm_chat`` agent (with events or not) or a ``ConfiguredAgent`` as the store's
    :class:`SessionAgent`. A turn is its engine :class:`~simplellmfunc.engine.Run`, which the
    store drives in its turn's task (one pump per turn): an ``@llm_chat`` agent's, or a
    ``ConfiguredAgent``'s with its trace recorder tapped on the run's emitter
    (:meth:`ConfiguredAgent.turn_run`; a chain or team agent's turn is a
    :class:`DrivenTurn`, driven in that task too)."""

    def __init__(self, agent: ChatAgent | ConfiguredAgent) -> None:
        self.agent = agent

    async def turn(self, turn: AgentTurn) -> AsyncIterable[Any] | DrivenTurn:
        options = turn.call_options()
        if isinstance(self.agent, ConfiguredAgent):
            return await self.agent.turn_run(turn.message, turn.history, **options)
        if turn.message is None:  # continue the history (a client's tool results, say)
            return await self.agent.run(history=turn.history, _resume=True, **options)
        return await self.agent.run(turn.message, history=turn.history, **options)
