"""``SessionStore``: one agent, many users — a session per user, with its own history and kernel.

Each turn runs in a task of the store, not in the caller's, driven by the engine's event pump
(:func:`~simplellmfunc.engine.start_pump` in the store's task group, read with
:func:`~simplellmfunc.engine.pump_items`): a client that disconnects (the caller leaves the
``async for``, or is cancelled) ends the turn like an abort by default, and the session keeps the
valid history (``on_disconnect="cancel"`` drops the turn instead); a turn that waits for a
person is parked instead, for :meth:`SessionStore.follow`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Mapping,
    Sequence,
)
from contextlib import aclosing
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream

from .._abort import AbortSignal
from .._events import EventYield, ResponseYield
from .._messages import history_to_dicts
from .._resource import AsyncResource
from ..engine import ApprovalDecision, Run, pump_items, start_pump
from ..exceptions import SessionError
from ..runtime.config import ServeLimits
from ..runtime.stores import InMemoryStore, Namespace, Store
from ._agents import AgentTurn, CallableAgent, DrivenTurn, SessionAgent, history_of
from ._session import Session, check_session_id

if TYPE_CHECKING:
    from ..builtin import KernelPool, PyRepl

__all__ = ["OnDisconnect", "SessionStore"]

OnDisconnect = Literal["abort", "cancel"]
logger = logging.getLogger("simplellmfunc.sessions")
_HISTORY_KEY = "history"
_CLOSE_WAIT = 30.0  # how long closing waits for an aborted turn to end
_DEFAULTS = ServeLimits()  # the one set of defaults
_BUFFER = 1024  # items a turn runs ahead of its reader (and a parked turn keeps)
_GONE = (anyio.BrokenResourceError, anyio.ClosedResourceError)


class SessionStore(AsyncResource):
    """Sessions of one agent: history, PyRepl kernel, SelfReference key, abort and last use.

    Use it as an async context manager (an :class:`~simplellmfunc._resource.AsyncResource`:
    ``open`` / ``aclose``; it owns the turns' tasks, the kernel pool and the idle reaper)::

        async with SessionStore(agent, pyrepl=True, pool_size=2) as sessions:
            async for item in sessions.chat("alice", "hello"):
                ...

    Args:
        agent: A :class:`SessionAgent` (it gets each turn as an :class:`AgentTurn`), or a
            function taken as a :class:`CallableAgent` (an ``@llm_chat`` function,
            ``enable_event=True`` for events and a final ``ResponseYield``).
        pyrepl: Give each session a PyRepl kernel: ``True``, or the keyword arguments of
            :class:`~simplellmfunc.PyRepl` (``execution_timeout_seconds`` …).
        root: The sessions' folder: ``<root>/<session id>/logs`` is the kernel's audit log.
            A sandboxed kernel (the default) works in its own private folder, which lives as
            long as the kernel; with ``pyrepl={"sandbox": False}`` it works in
            ``<root>/<session id>/work``. Default: a temporary folder, removed with each session
            and with the store.
        pool_size: Kernels kept started ahead of time (a :class:`KernelPool`; 0: none).
        store: Where histories are kept between turns and after a session is reclaimed
            (default: an :class:`InMemoryStore`; a ``SQLiteStore`` or ``RedisStore`` keeps
            them across restarts). Items live under ``Namespace(agent_name, session id)``.
        agent_name: The store namespace and SelfReference key prefix.
        idle_timeout: Seconds without a turn after which a session is reclaimed (its kernel
            closed; its history stays in the store); ``None``: never. The defaults of this
            and ``max_sessions`` are :class:`~simplellmfunc.runtime.config.ServeLimits`'.
        max_sessions: Open sessions at most; opening one more reclaims the least recently used
            idle session, or raises :class:`SessionError` when every session is busy.
        on_disconnect: What a turn does when its consumer leaves early: ``"abort"`` (default:
            it ends like an abort, the session keeps the valid history) or ``"cancel"`` (it is
            cancelled and the turn is dropped from the history).
        self_reference: A ``SelfReference`` shared by the sessions; each session uses the key
            ``<agent_name>.<session id>`` and its kernel gets it as ``self_reference``.

    Raises:
        SessionError: For a ``max_sessions`` below 1 or a non-positive ``idle_timeout``.
    """

    def __init__(
        self,
        agent: SessionAgent | Callable[..., Any],
        *,
        pyrepl: bool | Mapping[str, Any] = False,
        root: str | Path | None = None,
        pool_size: int = 0,
        store: Store | None = None,
        agent_name: str = "agent",
        idle_timeout: float | None = _DEFAULTS.idle_timeout,
        max_sessions: int = _DEFAULTS.max_sessions,
        on_disconnect: OnDisconnect = "abort",
        self_reference: Any = None,
    ) -> None:
        if max_sessions < 1:
            raise SessionError(f"max_sessions must be at least 1, got {max_sessions}")
        if idle_timeout is not None and idle_timeout <= 0:
            raise SessionError(f"idle_timeout must be positive, got {idle_timeout}")
        Namespace(agent_name)  # checks the name
        self._agent: SessionAgent = (
            agent if isinstance(agent, SessionAgent) else CallableAgent(agent)
        )
        self._repl_options: dict[str, Any] | None = (
            None if pyrepl is False else {} if pyrepl is True else dict(pyrepl)
        )
        self._root = Path(root).absolute() if root is not None else None
        self._own_root = root is None
        self._pool_size = pool_size
        self._store = store or InMemoryStore()
        self._agent_name = agent_name
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._on_disconnect = on_disconnect
        self._self_reference = self_reference
        self._sessions: dict[str, Session] = {}
        self._opening = anyio.Lock()
        self._tasks: TaskGroup | None = None
        self._pool: KernelPool | None = None
        self._closing = False

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether sessions can be opened (the store is open and not closing)."""
        return self._tasks is not None and not self._closing

    @property
    def agent(self) -> SessionAgent:
        """The agent the store hands its turns to."""
        return self._agent

    async def open(self) -> None:
        """Start the turns' task group, the kernel pool and the idle reaper (``async with``
        does).

        Raises:
            SessionError: If the store is open already.
        """
        if self._tasks is not None:
            raise SessionError("the session store is open already")
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="simplellmfunc-sessions-"))
        tasks = anyio.create_task_group()
        await tasks.__aenter__()
        self._tasks, self._closing = tasks, False
        try:
            if self._repl_options is not None and self._pool_size > 0:
                from ..builtin import KernelPool

                sandbox = self._repl_options.get("sandbox", True)
                pool = KernelPool(self._pool_size, sandbox=sandbox)
                await pool.open()
                self._pool = pool
            if self.idle_timeout is not None:
                tasks.start_soon(self._reap, self.idle_timeout)
        except BaseException:  # boundary: cleanup, re-raised: what was opened is closed
            await self.aclose()
            raise

    async def aclose(self) -> None:
        """Close every session (:meth:`close_all`), the kernel pool, the turns' tasks and the
        temporary root (idempotent; leaving ``async with`` does this)."""
        self._closing = True
        try:
            await self.close_all()
            pool, self._pool = self._pool, None
            if pool is not None:
                await pool.aclose()
            tasks, self._tasks = self._tasks, None
            if tasks is not None:
                tasks.cancel_scope.cancel()
                await tasks.__aexit__(None, None, None)
        finally:
            # A session whose opening was under way when the closing began goes too.
            await self.close_all()

    async def close_all(self) -> None:
        """Close every session: abort its turn, keep its history, close its kernel and remove
        its temporary folder. Shielded: a cancelled caller still leaves nothing behind. Leaving
        the ``async with`` does this, then closes the kernel pool and the temporary root."""
        with anyio.CancelScope(shield=True):
            for session_id in list(self._sessions):
                await self.close_session(session_id)
            if self._own_root and self._root is not None:
                await anyio.to_thread.run_sync(shutil.rmtree, self._root, True)

    # -- sessions -----------------------------------------------------------------------------

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._sessions

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def sessions(self) -> dict[str, Session]:
        """The open sessions by id (a copy)."""
        return dict(self._sessions)

    def get(self, session_id: str) -> Session:
        """The open session ``session_id``.

        Raises:
            SessionError: If no such session is open.
        """
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionError(f"no open session {session_id!r}", reason="unknown")
        return session

    async def open_session(
        self, session_id: str, *, history: Sequence[Mapping[str, Any]] | None = None
    ) -> Session:
        """The session ``session_id``, opened if needed (its history read from the store, or
        ``history`` when given: a conversation the caller holds, e.g. a stateless request's).

        Raises:
            SessionError: For an invalid id, a store that is not entered, or when
                ``max_sessions`` are open and all are busy.
        """
        check_session_id(session_id)
        if self._tasks is None or self._closing:
            raise SessionError(
                "the session store is not open: use `async with SessionStore(...)`",
                reason="closed",
            )
        async with self._opening:
            session = self._sessions.get(session_id)
            if session is not None:
                return session
            if len(self._sessions) >= self.max_sessions:
                await self._make_room()
            if history is None:
                item = await self._store.get(self._namespace(session_id), _HISTORY_KEY)
                history = list(item.value) if item is not None else []
            key = f"{self._agent_name}.{session_id}"
            turns = [dict(m) for m in history]
            session = Session(session_id, turns, self._new_repl(session_id), key)
            self._sessions[session_id] = session
            return session

    async def close_session(self, session_id: str, *, forget: bool = False) -> bool:
        """Close one session: abort its turn (the history is kept), save the history (delete
        it with ``forget=True``), close the kernel, and remove its folder when the store made
        it. False if it was not open."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return False
        session.closed = True
        with anyio.CancelScope(shield=True):
            if session.abort("the session was closed"):
                with anyio.move_on_after(_CLOSE_WAIT):
                    await session.wait_idle()
            if forget:
                await self._store.delete(self._namespace(session_id), _HISTORY_KEY)
            else:
                await self._save(session)
            if session.repl is not None:
                await session.repl.aclose()
            if self._own_root and self._root is not None:
                folder = self._root / session_id
                if folder.exists():  # a session without a kernel made none: no thread hop
                    await anyio.to_thread.run_sync(shutil.rmtree, folder, True)
        return True

    async def history(self, session_id: str) -> list[dict[str, Any]]:
        """A copy of the history of ``session_id``: the open session's, else the stored one
        (empty for a session never seen)."""
        session = self._sessions.get(session_id)
        if session is not None:
            return [dict(m) for m in session.history]
        item = await self._store.get(self._namespace(check_session_id(session_id)), _HISTORY_KEY)
        return [dict(m) for m in item.value] if item is not None else []

    async def reclaim_idle(self, idle_timeout: float | None = None) -> list[str]:
        """Close the sessions idle for ``idle_timeout`` seconds (default: the store's) and
        return their ids; their histories stay in the store."""
        limit = self.idle_timeout if idle_timeout is None else idle_timeout
        if limit is None:
            return []
        idle = [s.id for s in self._sessions.values() if not s.busy and s.idle_for() >= limit]
        for session_id in idle:
            await self.close_session(session_id)
        return idle

    def abort(self, session_id: str, reason: str = "aborted by user") -> bool:
        """Abort the running turn of ``session_id``; False when none runs.

        Raises:
            SessionError: If no such session is open.
        """
        return self.get(session_id).abort(reason)

    async def abort_running(self, reason: str, *, wait: float = 30.0) -> int:
        """Abort every running turn and wait (``wait`` seconds at most each) until each has
        ended with a valid history: what a server does before it shuts down. Shielded; how
        many turns were running."""
        aborted = 0
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions.values()):
                if session.abort(reason):
                    aborted += 1
                    with anyio.move_on_after(wait):
                        await session.wait_idle()
        return aborted

    def submit_input(self, session_id: str, request_id: str, value: str) -> None:
        """Answer the ``kernel_input_request`` ``request_id`` of ``session_id``'s kernel.

        Raises:
            SessionError: If no such session is open, or it has no kernel.
            InputRefusedError: If the request timed out, was answered, ended or is unknown.
        """
        self.get(session_id).submit_input(request_id, value)

    def answer(self, session_id: str, request_id: str, answer: ApprovalDecision | str) -> None:
        """Answer what ``session_id``'s turn waits for, by request id: a tool approval (an
        :class:`~simplellmfunc.ApprovalDecision`; the id is the call id of the
        ``ApprovalRequestEvent``) or a kernel ``input()`` (a string; the id of the
        ``kernel_input_request``). Front ends read the wire form with ``parse_answer``.

        Raises:
            SessionError: If no such session is open (or it has no kernel, for ``input()``).
            AnswerRefusedError: If no approval request waits under that id.
            InputRefusedError: If the ``input()`` request cannot take the value.
        """
        self.get(session_id).answer(request_id, answer)

    # -- turns --------------------------------------------------------------------------------

    async def chat(
        self, session_id: str, message: str | None, *, hooks: Sequence[Any] = ()
    ) -> AsyncGenerator[Any, None]:
        """One turn of ``session_id`` on ``message`` (``None``: continue the history as it
        is): yields what the agent yields (events, then the ``ResponseYield``); the session
        keeps the turn's history. ``hooks`` are run hooks of this turn only.

        Leaving early (a client disconnect) ends the turn as ``on_disconnect`` says.

        Raises:
            SessionError: If the session is busy with another turn (see :meth:`open_session`).
            Exception: Whatever the agent raised (the history is then left as it was).
        """
        session = await self.open_session(session_id)
        abort = session.begin()
        session.turn_message = message
        assert self._tasks is not None
        turn = self._agent_turn(session, abort, message, hooks)
        receive = start_pump(partial(self._turn, session, turn), self._tasks, _BUFFER)
        async with aclosing(self._consume(session, receive)) as items:
            async for item in items:
                yield item

    def pending(self, session_id: str) -> list[dict[str, Any]]:
        """What ``session_id``'s running turn waits for a person to answer, oldest first (each
        request's event in its wire form); empty when nothing waits or no session is open."""
        session = self._sessions.get(session_id)
        return session.pending() if session is not None else []

    def follow(self, session_id: str) -> AsyncIterator[Any]:
        """The rest of ``session_id``'s running turn, whose consumer left while the turn waited
        for a person (a reloaded page, an A2A task gone ``input-required``, an AG-UI run that
        ended on an interrupt): the items it made since, then the new ones to its end.

        The turn is taken at once (before the first iteration), so answering its request and
        then following it cannot miss its end. Leaving early parks it again while it waits.

        Raises:
            SessionError: If no such session is open, or its turn is not parked (none runs,
                or someone follows it already): ``reason="not_parked"``.
        """
        session = self.get(session_id)
        receive, session.parked = session.parked, None
        if receive is None:
            raise SessionError(
                f"session {session_id!r} has no turn waiting to be followed", reason="not_parked"
            )
        return self._consume(session, receive)

    def _consume(
        self, session: Session, receive: MemoryObjectReceiveStream[Any]
    ) -> AsyncGenerator[Any, None]:
        """A turn's items, read from its pump; a reader that leaves early parks the turn while
        a person is asked, else ends it as ``on_disconnect`` says."""
        return pump_items(receive, on_leave=partial(self._leave, session, receive))

    def _leave(self, session: Session, receive: MemoryObjectReceiveStream[Any]) -> bool:
        """The reader left before the end of the turn: whether its stream is kept (parked)."""
        if session.waits and session.busy:
            session.parked = receive  # a person is asked: the turn waits for a follower
            return True
        if self._on_disconnect == "abort":
            session.abort("the client disconnected")
        elif session._cancel is not None:
            session._cancel.cancel()
        return False

    async def _turn(self, session: Session, turn: AgentTurn, send: Callable[[Any], Any]) -> None:
        """The body of the turn's pump: the agent's items, or its engine run driven here."""
        history: list[dict[str, Any]] | None = None
        events_only = False

        async def put(item: Any) -> None:
            nonlocal history
            if events_only and not isinstance(item, EventYield):
                return  # a run's text and raw items: its events carry them
            history = history_of(item, history)
            session.track(item)
            parked = session.parked
            if parked is not None and _full(parked):
                return  # nobody follows yet: past the buffer, items are dropped
            try:
                await send(item)
            except _GONE:  # the reader left: the turn goes on without it
                pass

        try:
            with anyio.CancelScope() as scope:
                session._cancel = scope
                try:
                    items = await self._agent.turn(turn)
                    if isinstance(items, Run):
                        events_only = True
                        items.context.emitter.connect(put)
                        await items.run_to_end()
                        result = items.state.result()
                        events_only = False
                        await put(ResponseYield(result.text, history_to_dicts(result.messages)))
                    elif isinstance(items, DrivenTurn):
                        events_only = True
                        response = await items.drive(put)
                        events_only = False
                        await put(response)
                    else:
                        iterator = aiter(items)
                        try:
                            async for item in iterator:
                                await put(item)
                        finally:
                            close = getattr(iterator, "aclose", None)
                            if close is not None:
                                await close()
                except Exception:  # boundary: cleanup, re-raised
                    history = None  # the turn failed: the history is left as it was
                    raise
        finally:
            session.end(history)
            if not session.closed:  # else close_session() saves (or forgets) it
                with anyio.CancelScope(shield=True):
                    await self._save(session)

    def _agent_turn(
        self, session: Session, abort: AbortSignal, message: str | None, hooks: Sequence[Any]
    ) -> AgentTurn:
        toolkit = tuple(session.repl.toolset) if session.repl is not None else ()
        own: tuple[Any, ...] = ()
        if self._self_reference is not None:
            own = (self._self_reference.run_hook(session.self_reference_key),)
        history = list(session.history)
        return AgentTurn(message, history, abort, session.id, toolkit, (*own, *hooks))

    # -- helpers ------------------------------------------------------------------------------

    def _namespace(self, session_id: str) -> Namespace:
        return Namespace(self._agent_name, session_id)

    async def _save(self, session: Session) -> None:
        try:
            await self._store.set(self._namespace(session.id), _HISTORY_KEY, session.history)
        except Exception as exc:  # boundary: a store failure must not lose the session
            logger.warning("session %s: the history could not be saved: %s", session.id, exc)

    def _new_repl(self, session_id: str) -> PyRepl | None:
        if self._repl_options is None:
            return None
        from ..builtin import PyRepl

        assert self._root is not None
        folder = self._root / session_id
        options = {"log_dir": folder / "logs", "pool": self._pool, **self._repl_options}
        if options.get("sandbox", True) is False:
            (folder / "work").mkdir(parents=True, exist_ok=True)
            repl = PyRepl(folder / "work", **options)
        else:
            # A sandboxed kernel works in its own private folder (bound in when it starts), so
            # one from the warm pool serves any session.
            repl = PyRepl(**options)
        if self._self_reference is not None:
            repl.attach_self_reference(self._self_reference)
        return repl

    async def _make_room(self) -> None:
        idle = [s for s in self._sessions.values() if not s.busy]
        if not idle:
            raise SessionError(
                f"{self.max_sessions} sessions are open and all are running a turn: "
                "try again later, or raise max_sessions",
                reason="full",
            )
        await self.close_session(min(idle, key=lambda s: s.last_used).id)

    async def _reap(self, idle_timeout: float) -> None:
        while True:
            await anyio.sleep(min(idle_timeout / 4, 30.0))
            await self.reclaim_idle()

    def __repr__(self) -> str:
        return f"<SessionStore {self._agent_name} sessions={len(self._sessions)}>"


def _full(receive: MemoryObjectReceiveStream[Any]) -> bool:
    stats = receive.statistics()
    return stats.current_buffer_used >= stats.max_buffer_size
