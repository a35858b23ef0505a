"""Forks of a bound agent: SimpleLLMFunc's ``self_reference.bind_agent_instance(agent)`` and
``self_reference.instance.fork(...)`` / ``fork_spawn(...)`` / ``fork_gather_all(...)``.

These forks are calls of the bound agent made from Python, or from a kernel cell that runs
outside an ``@llm_chat`` turn (inside a turn, ``runtime.selfref.fork.spawn`` starts a child of
the turn's run instead, see ``_forks``). A fork:

* gets the key ``<source key>::fork::<n>`` (or ``fork_memory_key=``), bound to the source key's
  history — stored settled, so a source caught inside a tool call gives the history before it —
  and the source's experiences;
* calls the agent with that history (its ``history`` / ``chat_history`` argument) and the
  caller's arguments. An ``@llm_chat`` agent runs on the engine with its SelfReference hook
  moved to the fork's key (the source key is not touched) and a fresh PyRepl per PyRepl of its
  toolkit, closed when the fork ends; any other callable may return ``(response, history)``,
  be awaitable, or an async iterator of such pairs (SimpleLLMFunc's shapes);
* stores the history it returns under its key — validated: an invalid history fails the fork,
  so every stored history stays valid — and reports like an in-turn fork, with SimpleLLMFunc's
  keys beside (``source_memory_key``, ``parent_fork_id``, ``history_count``, ``history_included``,
  ``error_type`` / ``error_message``).

Nesting: the agent call runs with the fork as the active one, so a fork made inside it starts
from the fork's key, one level deeper (``max_fork_depth`` applies). Spawned forks run in a task
group: the enclosing fork's, else the kernel cell's (cancelled when the cell ends), else — plain
host code, which has none — they start when gathered (status ``"queued"`` until then).
Lifecycle events go to ``_event_emitter`` (the cell's emitter in a kernel):
``selfref_fork_spawned``, ``selfref_fork_start``, ``selfref_fork_error`` (a failure) and
``selfref_fork_end``.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from ..._messages import history_to_dicts
from ...engine import Run
from ...exceptions import ArgumentValueError, UnboundAgentError, UnboundKeyError, UserError
from ..pyrepl import current_cell, fork_repl_tools
from ._bank import MemoryBank
from ._child import ForkStatus, fork_id_list, reply_result

if TYPE_CHECKING:
    from ..._transcript import Transcript
    from ...engine import Invocation


__all__ = ["InstanceForks", "InstanceHandle"]


@runtime_checkable
class _PreparedAgent(Protocol):
    """An agent that compiles its call into an engine run (``ChatAgent``: the builtins sit
    below the decorators, so the type is named by what it does, not imported)."""

    async def prepare(self, *args: Any, **kwargs: Any) -> tuple[Invocation, Transcript]: ...


_HISTORY_NAMES = ("history", "chat_history")
_CLEANUP_SECONDS = 15.0


@dataclass(slots=True, eq=False)
class _Fork:
    fork_id: str
    parent_fork_id: str | None
    depth: int
    source_key: str
    key: str
    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    emitter: Any
    limiter: anyio.CapacityLimiter
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    status: ForkStatus = "queued"
    started: bool = False
    response: Any = None
    error: Exception | None = None
    note: str | None = None  # why it was cancelled

    def info(self) -> dict[str, Any]:
        return {
            "fork_id": self.fork_id,
            "parent_fork_id": self.parent_fork_id,
            "depth": self.depth,
            "source_memory_key": self.source_key,
            "memory_key": self.key,
        }


@dataclass(frozen=True, slots=True)
class _Active:
    fork: _Fork
    task_group: TaskGroup
    limiter: anyio.CapacityLimiter  # for the forks it makes (one per level: no deadlock)


_ACTIVE: ContextVar[_Active | None] = ContextVar("simplellmfunc_selfref_instance", default=None)


class InstanceForks:
    """The bound agent of a memory bank and the forks made of it.

    Args:
        bank: The memory bank (keys, fork handles, limits).
    """

    def __init__(self, bank: MemoryBank) -> None:
        self._bank = bank
        self.agent: Callable[..., Any] | None = None
        self.default_key: str | None = None
        self._forks: dict[str, _Fork] = {}
        self._limiter = anyio.CapacityLimiter(bank.max_concurrent_forks)

    def bind(self, agent: Callable[..., Any], default_memory_key: str | None = None) -> None:
        """Bind ``agent`` (what forks call) and the key forks start from by default.

        Raises:
            ArgumentValueError: If ``agent`` is not callable or the key not a non-empty string.
        """
        if not callable(agent):
            raise ArgumentValueError("agent_instance must be callable")
        if default_memory_key is not None and (
            not isinstance(default_memory_key, str) or not default_memory_key.strip()
        ):
            raise ArgumentValueError("default_memory_key must be a non-empty string")
        self.agent = agent
        self.default_key = default_memory_key

    # -- the three calls -------------------------------------------------------------------

    async def fork(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        source: str | None,
        target: str | None,
        emitter: Any,
        include_history: bool,
    ) -> dict[str, Any]:
        """Run one fork to its end; its failure is raised (after ``selfref_fork_error``)."""
        fork = await self._open(args, kwargs, source, target, emitter)
        await self._run(fork)
        if fork.error is not None:
            raise fork.error
        return self.report(fork, include_history)

    async def spawn(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        source: str | None,
        target: str | None,
        emitter: Any,
    ) -> dict[str, Any]:
        """Start a fork beside the caller (see the module docstring for where it runs)."""
        fork = await self._open(args, kwargs, source, target, emitter)
        group = _task_group()
        if group is not None:
            busy = sum(
                f.started and not f.done.is_set() and f.limiter is fork.limiter
                for f in self._forks.values()
            )
            fork.started = True
            fork.status = "running" if busy < fork.limiter.total_tokens else "queued"
            group.start_soon(self._run, fork, name=f"selfref fork {fork.fork_id}")
        await _emit(emitter, "selfref_fork_spawned", {**fork.info(), "status": fork.status})
        return {**fork.info(), "status": fork.status}

    async def gather(
        self, fork_ids: Any = None, include_history: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Wait for the forks ``fork_ids`` (an id, a handle, or a list of them; default: every
        fork made so far) and return ``{fork_id: report}``.

        Raises:
            UnboundKeyError: For an unknown fork id.
        """
        ids = fork_id_list(fork_ids) if fork_ids is not None else list(self._forks)
        forks = []
        for fork_id in ids:
            if fork_id not in self._forks:
                raise UnboundKeyError(f"fork_id {fork_id!r} is not found")
            forks.append(self._forks[fork_id])
        lazy = [f for f in forks if not f.started]
        if lazy:
            async with anyio.create_task_group() as tg:
                for fork in lazy:
                    fork.started = True
                    tg.start_soon(self._run, fork, name=f"selfref fork {fork.fork_id}")
        for fork in forks:
            await fork.done.wait()
        return {f.fork_id: self.report(f, include_history) for f in forks}

    def active_key(self) -> str | None:
        """The key of the fork whose agent call is running in this context, if any."""
        active = _ACTIVE.get()
        return active.fork.key if active is not None else None

    def pending(self, emitter: Any = None) -> bool:
        """Whether a fork (of ``emitter``, when given) has not ended."""
        return any(
            not f.done.is_set() and (emitter is None or f.emitter is emitter)
            for f in self._forks.values()
        )

    def report(self, fork: _Fork, include_history: bool = False) -> dict[str, Any]:
        """The fork's result: the in-turn fork report's keys plus SimpleLLMFunc's."""
        done = fork.status == "completed"
        history = self._bank.get_history(fork.key)
        out: dict[str, Any] = {
            **fork.info(),
            "task": fork.task,
            "status": fork.status,
            "response": fork.response if done else None,
            "result": reply_result(fork.response) if done else None,
            "error": fork.note
            if fork.error is None
            else f"{type(fork.error).__name__}: {fork.error}",
            "history_count": len(history),
            "history_included": include_history,
        }
        if fork.error is not None:
            out["error_type"] = type(fork.error).__name__
            out["error_message"] = str(fork.error)
        if include_history:
            out["history"] = history
        return out

    # -- inside --------------------------------------------------------------------------

    async def _open(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        source: str | None,
        target: str | None,
        emitter: Any,
    ) -> _Fork:
        if self.agent is None:
            raise UnboundAgentError(
                "No agent instance is bound to this SelfReference: call "
                "self_reference.bind_agent_instance(agent, default_memory_key=...) first"
            )
        active = _ACTIVE.get()
        parent = active.fork if active is not None else None
        depth = parent.depth + 1 if parent is not None else 1
        if depth > self._bank.max_fork_depth:
            raise UserError(
                f"fork depth limit reached: a fork at depth {depth - 1} cannot fork again "
                f"(max_fork_depth is {self._bank.max_fork_depth})"
            )
        source_key = self._source(source, parent)
        task = args[0] if args and isinstance(args[0], str) else kwargs.get("message", "")
        task = task if isinstance(task, str) else ""
        parent_id = parent.fork_id if parent is not None else None
        fork_id, key = await anyio.to_thread.run_sync(
            self._bank.open_fork, source_key, parent_id, task
        )
        if fork_id in self._forks:  # the same number under another source key
            fork_id = f"{source_key}:{fork_id}"
        if target is not None:
            key = target
        history = self._bank.get_history(source_key)
        await anyio.to_thread.run_sync(self._bank.bind_history, key, history)
        limiter = active.limiter if active is not None else self._limiter
        fork = _Fork(
            fork_id, parent_id, depth, source_key, key, task, args, kwargs, emitter, limiter
        )
        self._forks[fork_id] = fork
        return fork

    def _source(self, source: str | None, parent: _Fork | None) -> str:
        if source is not None:
            if source not in set(self._bank.keys()):
                raise UnboundKeyError(f"memory key {source!r} is not bound")
            return source
        if parent is not None:
            return parent.key
        if self.default_key is not None:
            if self.default_key not in set(self._bank.keys()):
                self._bank.bind_history(self.default_key, [])
            return self.default_key
        keys = self._bank.keys()
        if len(keys) == 1:
            return keys[0]
        raise UserError(
            "source_memory_key is required: "
            + ("no memory key is bound" if not keys else "several memory keys are bound")
        )

    async def _run(self, fork: _Fork) -> None:
        try:
            with fork.scope:
                async with fork.limiter:
                    fork.status = "running"
                    start = {**fork.info(), "status": "running"}
                    await _emit(fork.emitter, "selfref_fork_start", start)
                    await self._call(fork)
                fork.status = "completed"
        except Exception as exc:  # boundary: a fork's failure is reported (and fork() re-raises)
            fork.status, fork.error = "failed", _unwrap(exc)
        finally:
            with anyio.CancelScope(shield=True):
                if fork.status in ("queued", "running"):
                    fork.status = "cancelled"
                    fork.note = "cancelled: what ran it (a cell, a parent fork) ended first"
                error = fork.note if fork.error is None else str(fork.error)
                outcome = {"status": fork.status, "error": error}
                with anyio.move_on_after(_CLEANUP_SECONDS):
                    await anyio.to_thread.run_sync(
                        self._bank.close_fork, fork.source_key, fork.fork_id, outcome
                    )
                    fork.done.set()
                    info = {**fork.info(), "status": fork.status}
                    if fork.status == "failed" and fork.error is not None:
                        kind = {"error_type": type(fork.error).__name__}
                        kind["error_message"] = str(fork.error)
                        await _emit(fork.emitter, "selfref_fork_error", {**info, **kind})
                    await _emit(fork.emitter, "selfref_fork_end", info)
                fork.done.set()

    async def _call(self, fork: _Fork) -> None:
        agent = self.agent
        assert agent is not None  # checked when the fork was opened
        history = self._bank.get_history(fork.key)
        async with anyio.create_task_group() as tg:
            limiter = anyio.CapacityLimiter(self._bank.max_concurrent_forks)
            token = _ACTIVE.set(_Active(fork, tg, limiter))
            try:
                if isinstance(agent, _PreparedAgent):
                    fork.response = await self._run_chat(agent, fork, history)
                    return
                kwargs = dict(fork.kwargs)
                name = _history_name(agent)
                if name is not None and name not in kwargs:
                    kwargs[name] = copy.deepcopy(history)
                response, final = await _consume(agent(*fork.args, **kwargs))
            finally:
                _ACTIVE.reset(token)
        fork.response = response
        if final is not None:  # validated: an invalid history fails the fork
            await anyio.to_thread.run_sync(self._bank.bind_history, fork.key, final)

    async def _run_chat(self, agent: Any, fork: _Fork, history: list[dict[str, Any]]) -> Any:
        """Run an ``@llm_chat`` agent on the engine, its memory hook moved to the fork's key."""
        from ._hook import SelfReferenceHook

        kwargs = {k: v for k, v in fork.kwargs.items() if k not in _HISTORY_NAMES}
        invocation, transcript = await agent.prepare(*fork.args, history=history, **kwargs)
        hooks = tuple(
            SelfReferenceHook(self._bank, fork.key)
            if isinstance(hook, SelfReferenceHook) and hook.bank is self._bank
            else hook
            for hook in invocation.hooks
        )
        tools, repls = fork_repl_tools(invocation.tools)
        invocation = replace(
            invocation, hooks=hooks, tools=tools, fork_id=fork.fork_id, fork_depth=fork.depth
        )
        run = Run(invocation, transcript)
        try:
            await run.run_to_end()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_SECONDS):
                for repl in repls:
                    await repl.aclose()
        if not any(isinstance(h, SelfReferenceHook) for h in hooks):
            messages = history_to_dicts(run.state.transcript.messages)
            await anyio.to_thread.run_sync(self._bank.bind_history, fork.key, messages)
        return run.state.result().text


class InstanceHandle:
    """``self_reference.instance``: the bound agent and forks of it (SimpleLLMFunc's API)."""

    __slots__ = ("_forks",)

    def __init__(self, forks: InstanceForks) -> None:
        self._forks = forks

    def is_bound(self) -> bool:
        """Whether an agent is bound."""
        return self._forks.agent is not None

    def get(self) -> Callable[..., Any] | None:
        """The bound agent, if any."""
        return self._forks.agent

    async def fork(
        self,
        *agent_args: Any,
        source_memory_key: str | None = None,
        fork_memory_key: str | None = None,
        _event_emitter: Any = None,
        include_history: bool = False,
        **agent_kwargs: Any,
    ) -> dict[str, Any]:
        """Call the bound agent as a fork and wait for it; returns its report.

        Raises:
            UserError: If no agent is bound, no source key can be chosen, or beyond the depth
                limit.
            Exception: What the agent raised (the fork is recorded as failed).
        """
        return await self._forks.fork(
            agent_args,
            agent_kwargs,
            source=source_memory_key,
            target=fork_memory_key,
            emitter=_event_emitter,
            include_history=include_history,
        )

    async def fork_spawn(
        self,
        *agent_args: Any,
        source_memory_key: str | None = None,
        fork_memory_key: str | None = None,
        _event_emitter: Any = None,
        **agent_kwargs: Any,
    ) -> dict[str, Any]:
        """Start a fork of the bound agent; returns ``{fork_id, memory_key, ..., status}``.

        Raises:
            UserError: As :meth:`fork`.
        """
        return await self._forks.spawn(
            agent_args,
            agent_kwargs,
            source=source_memory_key,
            target=fork_memory_key,
            emitter=_event_emitter,
        )

    async def fork_gather_all(
        self, fork_ids: Any = None, include_history: bool = False
    ) -> dict[str, dict[str, Any]]:
        """Wait for spawned forks (``fork_ids``: an id, a handle, or a list of them; default:
        all) and return ``{fork_id: report}``.

        Raises:
            UnboundKeyError: For an unknown fork id.
        """
        return await self._forks.gather(fork_ids, include_history)

    def has_pending_fork_tasks(self, event_emitter: Any = None) -> bool:
        """Whether a spawned fork (of ``event_emitter``, when given) has not ended."""
        return self._forks.pending(event_emitter)

    def __repr__(self) -> str:
        return f"<SelfReference instance: {'bound' if self.is_bound() else 'unbound'}>"


# -- helpers --------------------------------------------------------------------------------


def _task_group() -> TaskGroup | None:
    """Where a spawned fork runs: the enclosing fork's task group, else the kernel cell's."""
    active = _ACTIVE.get()
    if active is not None:
        return active.task_group
    cell = current_cell()
    return cell.task_group if cell is not None else None


def cell_emitter() -> Any:
    """The emitter of the kernel cell whose primitive call is running, if any."""
    cell = current_cell()
    return cell.emitter if cell is not None else None


def _history_name(agent: Callable[..., Any]) -> str | None:
    try:
        parameters = inspect.signature(agent).parameters
    except (TypeError, ValueError):
        return None
    return next((n for n in _HISTORY_NAMES if n in parameters), None)


def _split(value: Any) -> tuple[Any, list[dict[str, Any]] | None]:
    from ..._events import ResponseYield

    if isinstance(value, ResponseYield):
        return value.response, list(value.messages)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], list):
        return value[0], value[1]
    return value, None


async def _consume(output: Any) -> tuple[Any, list[dict[str, Any]] | None]:
    """The last response and history of an agent call (awaitable, async iterator or value)."""
    from ..._events import EventYield

    if inspect.isawaitable(output):
        return _split(await output)
    if not hasattr(output, "__aiter__"):
        return _split(output)
    response: Any = None
    history: list[dict[str, Any]] | None = None
    # Closed here, in this task, also when the fork is cancelled mid-iteration.
    async with contextlib.AsyncExitStack() as stack:
        if hasattr(output, "aclose"):
            stack.push_async_callback(output.aclose)
        async for item in output:
            if isinstance(item, EventYield):
                continue
            response, last = _split(item)
            history = last if last is not None else history
    return response, history


def _unwrap(exc: Exception) -> Exception:
    """The one exception a task group wrapped (the agent's own), else ``exc``."""
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


async def _emit(emitter: Any, name: str, payload: dict[str, Any]) -> None:
    emit: Callable[[str, Any], Awaitable[None] | None] | None = getattr(emitter, "emit", None)
    if emit is None:
        return
    result = emit(name, payload)
    if inspect.isawaitable(result):
        await result
