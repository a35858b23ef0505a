"""The agent value: :class:`ChatAgent` (what ``@llm_chat`` returns), and how one runs under
another run: :func:`agent_run`, :class:`AgentTool`.

:func:`agent_run` prepares the run a call of the agent would iterate (:meth:`ChatAgent.prepare`)
and, given an emitter to stream into, makes it a sub-run: its events go into that stream tagged
with the agent's name (``origin.agent``) and depth (``origin.fork_depth``), the caller's call
id as their parent. The multi-agent runtime drives handoffs, group chats and parallel runs with
it; :class:`AgentTool` (``agent.as_tool()``) runs an agent inside a tool call of another
agent's run (:func:`~simplellmfunc.engine.current_run`): events into the caller's stream, usage
into the caller's total, the caller's abort stopping it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import Any

from .._abort import AbortSignal, PauseSignal
from .._events import EventOrigin
from .._messages import Message, UserMessage
from .._transcript import Transcript
from ..engine import (
    Emitter,
    EngineOptions,
    Invocation,
    Run,
    RunContext,
    RunHook,
    RunResult,
    answer_deferred,
    current_run,
    current_tool_call_id,
    new_call_id,
)
from ..exceptions import DecoratorError, UserError
from ..providers import LLMInterface
from ..tools import TaskTool, Tool, ToolContext, ToolProvider
from ._common import CallOptions, split_call_kwargs, unbound
from ._decorated import Decorated
from ._history import HistoryView, chat_output, initial_messages
from ._prompt import HISTORY_NAMES, fill_template, render_arguments

__all__ = ["AgentTool", "ChatAgent", "ChatSettings", "agent_run", "run_under"]


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """What ``@llm_chat(...)`` was given, shared by the agents it decorates."""

    llm: LLMInterface
    tools: tuple[Tool, ...]
    providers: tuple[ToolProvider, ...]
    options: EngineOptions
    params: dict[str, Any]
    stream: bool
    raw: bool
    enable_event: bool
    hooks: tuple[RunHook, ...]


class ChatAgent(Decorated):
    """An ``@llm_chat`` agent: call it for the SimpleLLMFunc shapes, :meth:`run` it for the
    engine's :class:`~simplellmfunc.engine.Run`.

    ``agent(message, history=...)`` is an async iterator of ``(text, updated_history)`` (see
    :func:`llm_chat`); :meth:`resume` continues a paused run; :meth:`run` is the one way to get
    the run's typed events and its :class:`~simplellmfunc.engine.RunResult`; :meth:`as_tool`
    makes the agent a tool of another agent. The agent keeps the decorated function's name,
    docstring and signature (``functools.update_wrapper``); decorating a method works: the
    instance is bound to the first parameter (and is not sent to the model).

    Raises:
        DecoratorError: (at decoration) If the function is not ``async def`` or has no
            history parameter.
    """

    __slots__ = ("_history_name", "_history_position")

    _settings: ChatSettings

    def __init__(self, func: Callable[..., Any], settings: ChatSettings) -> None:
        if not inspect.iscoroutinefunction(func) and not inspect.isasyncgenfunction(func):
            raise DecoratorError(f"@llm_chat needs an 'async def' function, got {func!r}")
        signature = inspect.signature(func)
        history_name = next((n for n in HISTORY_NAMES if n in signature.parameters), None)
        if history_name is None:
            raise DecoratorError("@llm_chat functions need a 'history' or 'chat_history' parameter")
        super().__init__(func, settings)
        self._history_name = history_name
        self._history_position = list(signature.parameters).index(history_name)

    # -- what the decorator was given ----------------------------------------------------------

    @property
    def name(self) -> str:
        """The name the agent goes by: its ``__name__`` (the function's, unless reassigned)."""
        return str(self.__name__)

    @property
    def description(self) -> str:
        """What the agent does, for other agents and clients: the first line of its
        docstring (its system prompt), or ``""``."""
        lines = (self.__doc__ or "").strip().splitlines()
        return lines[0].strip() if lines else ""

    # -- calls ----------------------------------------------------------------------------------

    async def __call__(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Run one turn; yields the SimpleLLMFunc shapes (see :func:`llm_chat`)."""
        run = await self._start(args, kwargs)
        enable_event, stream = self._settings.enable_event, self._settings.stream
        view = HistoryView(run.state.transcript)
        # aclosing: a consumer leaving early closes the run here, in this task.
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                yield chat_output(item, view, enable_event=enable_event, stream=stream)

    async def resume(
        self,
        history: list[dict[str, Any]],
        results: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Continue a paused run (``terminated_by="paused"``) from its history, or a deferred
        one (``terminated_by="deferred"``) with ``results``, the app's result of each pending
        call by call id: no new user message; takes ``_template_params``, ``_abort_signal``
        and ``_pause_signal``; yields what a call yields.

        Raises:
            DecoratorError: If ``history`` is empty or another argument is given.
            InvalidHistoryError: If ``results`` leave a pending call unanswered or answer a
                call that is not pending.
        """
        if not history:
            raise DecoratorError("resume() needs the history of a paused run")
        if results is not None:
            history = answer_deferred(history, results)
        run = await self._start((), kwargs, resumed=history)
        enable_event, stream = self._settings.enable_event, self._settings.stream
        view = HistoryView(run.state.transcript)
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                yield chat_output(item, view, enable_event=enable_event, stream=stream)

    async def run(self, *args: Any, **kwargs: Any) -> Run:
        """The run of ``agent(*args, **kwargs)``, not started: the one way to get an agent's
        events and result. Iterate it for its ``EventYield`` items and the
        :class:`~simplellmfunc.engine.RunResult` last, or ``await run.result()``.

        A missing history is an empty one; the per-call keyword arguments (``_abort_signal``,
        ``_pause_signal``, ``_session_id``, ``_toolkit`` …) work as in a call, and
        ``_resume=True`` continues the given history without a new user message (as
        :meth:`resume`).

        Raises:
            DecoratorError: For bad arguments or per-call options.
        """
        return await self._start(args, kwargs, events=True, default_history=True)

    def as_tool(self, name: str | None = None, description: str | None = None) -> AgentTool:
        """This agent as a tool of another agent (see :class:`AgentTool`)."""
        return AgentTool(self, name=name, description=description)

    def with_hooks(self, *hooks: RunHook) -> ChatAgent:
        """A copy of this agent whose runs also have ``hooks`` (after its own): what
        ``SharedMemory.wrap(agent)`` uses to run an agent with the shared memory in context."""
        copied = copy.copy(self)
        copied._settings = replace(self._settings, hooks=(*self._settings.hooks, *hooks))
        return copied

    async def prepare(self, *args: Any, **kwargs: Any) -> tuple[Invocation, Transcript]:
        """The invocation and transcript :meth:`run` would run (for callers that build the
        :class:`~simplellmfunc.engine.Run` themselves: a sub-run under another run's events)."""
        invocation, transcript, _, _ = await self._build(args, kwargs, default_history=True)
        return invocation, transcript

    # -- methods of a class ---------------------------------------------------------------------

    # -- inside ---------------------------------------------------------------------------------

    async def _start(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        resumed: list[dict[str, Any]] | None = None,
        events: bool | None = None,
        default_history: bool = False,
    ) -> Run:
        invocation, transcript, call, user = await self._build(
            args, kwargs, resumed=resumed, default_history=default_history
        )
        settings = self._settings
        if events is None:
            events = settings.enable_event
        return Run(
            invocation,
            transcript,
            abort=call.abort,
            pause=call.pause,
            user_input=user.text if isinstance(user, UserMessage) else "",
            events=events,
            text=not events,
            raw=settings.raw and not events,
        )

    async def _build(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        resumed: list[dict[str, Any]] | None = None,
        default_history: bool = False,
    ) -> tuple[Invocation, Transcript, CallOptions, Message | None]:
        if default_history and kwargs.pop("_resume", False):
            resumed = kwargs.pop(self._history_name, None) or []
        call = split_call_kwargs(kwargs)
        system = fill_template(self._doc, call.template_params)
        user: Message | None
        if resumed is not None:
            if kwargs:
                raise DecoratorError(f"resume() takes no arguments besides the history: {kwargs}")
            history: Any = resumed
            user = None
        else:
            args = (*self._bound, *args)
            if (
                default_history
                and self._history_name not in kwargs
                and len(args) <= self._history_position
            ):
                kwargs[self._history_name] = []
            arguments = unbound(self._bind(args, kwargs), self._bound)
            history = arguments.pop(self._history_name, None)
            user = await render_arguments(self._signature, arguments, bare_single_text=True)
        settings = self._settings
        invocation = Invocation(
            llm=settings.llm,
            system_prompt=system,
            tools=await call.resolve_tools(list(settings.tools), list(settings.providers)),
            session_id=call.session_id,
            stream=settings.stream,
            options=call.engine_options(settings.options),
            params=settings.params,
            hooks=settings.hooks + call.run_hooks(settings.providers),
            func_name=self.__name__,
        )
        transcript = Transcript(initial_messages(system, history, user))
        return invocation, transcript, call, user


async def agent_run(
    agent: ChatAgent,
    *args: Any,
    under: Emitter | None = None,
    name: str | None = None,
    depth: int = 1,
    abort: AbortSignal | None = None,
    history: list[dict[str, Any]] | None = None,
    resume: bool = False,
    tools: Sequence[Tool] = (),
    pause: PauseSignal | None = None,
    **kwargs: Any,
) -> Run:
    """The run of ``agent(*args, history=history, **kwargs)``, not started: :meth:`ChatAgent.run`
    as a sub-run of another run.

    Args:
        agent: An ``@llm_chat`` agent.
        under: Stream the run's events into this emitter's stream, tagged with ``name`` and
            ``depth`` (drive the run with ``run_to_end``); ``None``: a run of its own.
        name: The agent's name in event origins (default: its function name).
        depth: Its depth below the caller.
        abort: The run's abort signal.
        history: The conversation before this call (default: none).
        resume: Continue ``history`` without a new user message (``args`` then must be empty).
        tools: Tools added to the agent's own for this run (handoff tools).
        pause: The run's pause signal (it stops before its next LLM call once set).

    Raises:
        UserError: If ``agent`` is not an ``@llm_chat`` agent.
    """
    _check_agent(agent)
    if resume:
        kwargs = {**kwargs, "_resume": True, agent._history_name: history or []}
    elif history is not None:
        kwargs = {**kwargs, "history": history}
    invocation, transcript = await agent.prepare(*args, **kwargs)
    if tools:
        invocation = replace(invocation, tools=(*invocation.tools, *tools))
    if under is None:
        return Run(invocation, transcript, abort=abort, pause=pause)
    base = under.origin
    origin = EventOrigin(
        base.session_id,
        new_call_id(),
        0,
        base.agent_call_id,
        base.fork_id,
        base.fork_depth + depth,
        agent=name or agent.name,
        parent_tool_call_id=current_tool_call_id(),
    )
    return Run(invocation, transcript, under.derive(origin), abort, pause=pause)


class AgentTool(TaskTool):
    """An ``@llm_chat`` agent as a tool of another agent: ``agent.as_tool(name, description)``.

    The model sends a ``task``; the agent answers it in a fresh conversation and its final
    text is the tool result. Inside a run, the agent's events stream into the caller's stream
    (``origin.agent`` = the tool's name, ``origin.fork_depth`` one below the caller), its usage
    is added to the caller's total, and the caller's abort aborts it. Called outside a run, it
    simply runs the agent.

    Args:
        agent: The ``@llm_chat`` agent.
        name: The tool name (default: the agent's function name).
        description: What the agent does, for the calling model (default: its docstring's
            first line).
        timeout: Seconds before the call is given up (default: the run's tool timeout).

    Raises:
        UserError: If ``agent`` is not an ``@llm_chat`` agent.
    """

    def __init__(
        self,
        agent: ChatAgent,
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> None:
        _check_agent(agent)  # refuses anything but an @llm_chat agent, now
        self.agent = agent
        text = description or agent.description or f"Ask the agent {agent.name!r}."
        super().__init__(name or agent.name, text, timeout=timeout)

    async def answer(self, task: str, context: ToolContext | None) -> str:
        """Run the agent on ``task`` and return its final text.

        Raises:
            ProviderError: When the agent's model fails.
        """
        result = await run_under(self.agent, current_run(), task, name=self.name)
        return result.text


async def run_under(
    agent: ChatAgent,
    parent: RunContext | None,
    *args: Any,
    name: str,
    **kwargs: Any,
) -> RunResult:
    """Run ``agent`` to its end as a sub-run of ``parent`` (its usage counted there, its abort
    linked), or on its own when ``parent`` is ``None``."""
    if parent is None:
        run = await agent_run(agent, *args, **kwargs)
        return await run.result()
    abort = AbortSignal()
    unlink = parent.abort.add_callback(abort.abort) if parent.abort is not None else None
    try:
        run = await agent_run(agent, *args, under=parent.emitter, name=name, abort=abort, **kwargs)
        try:
            await run.run_to_end()
        finally:
            parent.add_usage(run.state.usage)
        return run.state.result()
    finally:
        if unlink is not None:
            unlink()


def _check_agent(agent: object) -> None:
    """Refuse anything but an ``@llm_chat`` agent.

    Raises:
        UserError: If ``agent`` is not a :class:`ChatAgent`.
    """
    if not isinstance(agent, ChatAgent):
        raise UserError(f"{agent!r} is not an @llm_chat agent")
