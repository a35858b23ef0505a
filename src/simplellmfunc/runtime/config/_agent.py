"""ConfiguredAgent: an agent built from an :class:`AgentConfig`, owning what it opened.

``async with ConfiguredAgent(config) as agent`` opens the model, the toolkit (kernel, MCP
servers), the memory store and the trace files, in this task, and closes them in reverse
order when left. :meth:`ConfiguredAgent.run` runs one turn:

* ``simple``: one LLM call without tools;
* ``react``: the tool loop, at most ``limits.max_steps`` LLM calls (the last one is asked for
  the final answer);
* ``chain``: one LLM call per stage, each stage's ``{input}`` being the previous output;
* ``group``: the ``agents`` (other config files, each opened as its own agent) in a group chat;
* ``parallel``: every one of the ``agents`` answers the message at once;

and a react agent with ``handoffs:`` may hand the conversation to those agents, they to theirs
(one graph, each config file opened once, see ``_team``).

The agent keeps the conversation (``history``) across turns, so one instance is a REPL
session; memory persists beyond it when the store does. Each turn is an ``@llm_chat`` call
with events on, fed through the agent's :class:`TraceRecorder`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from ..._abort import AbortSignal
from ..._events import (
    EventYield,
    ReactEndEvent,
    ResponseYield,
    is_event_yield,
    is_response_yield,
)
from ..._resource import AsyncResource
from ...decorators import ChatAgent, llm_chat
from ...engine import Run, RunHook
from ...exceptions import ConfigError, UserError
from ...providers import LLMInterface
from ...tools import Tool
from ..checkpoints import Checkpoint, CheckpointHook, CheckpointInfo, CheckpointManager
from ..stores import ScopedStore
from ..trace import TraceRecorder
from ._build import (
    build_llm,
    build_memory,
    build_options,
    build_recorder,
    build_toolkit,
)
from ._load import load_agent_config
from ._schema import AgentConfig, ChainStep
from ._team import TeamChat, TeamTurn, group_chat, handoff_chat, parallel_chat

__all__ = ["ConfiguredAgent", "RunObserver", "TurnResult"]

ChatFunction = Callable[..., AsyncIterator[Any]]


class RunObserver:
    """Learns what a run does while it runs (the CLI prints it); override what you need."""

    async def event(self, item: EventYield) -> None:
        """Every event of the run, in order (text deltas included)."""

    async def stage(self, index: int, total: int, name: str) -> None:
        """A chain stage (0-based ``index`` of ``total``) starts."""


@dataclass(frozen=True, slots=True)
class TurnResult:
    """How one turn ended.

    Attributes:
        text: The answer (partial when the turn was aborted).
        history: The conversation after the turn (valid for the next provider call).
        terminated_by: Why the (last) run ended: ``answer``, ``max_steps``, ``aborted`` ...
    """

    text: str
    history: list[dict[str, Any]]
    terminated_by: str

    @property
    def aborted(self) -> bool:
        """Whether an abort ended the turn."""
        return self.terminated_by == "aborted"


def _fill(prompt: str, text: str) -> str:
    """The stage's prompt with ``{input}`` replaced (or the input appended when it has none)."""
    if "{input}" in prompt:
        return prompt.replace("{input}", text)
    return f"{prompt}\n\n{text}"


class ChainTurn:
    """One turn of a chain agent, driven in the caller's task (a session store's turn):
    :meth:`drive` runs each stage's engine :class:`~simplellmfunc.engine.Run` in turn, its
    events sent to the caller's sink and recorded by the trace recorder (tapped on its
    emitter), each stage's answer filling the next one's prompt, and returns the
    ``ResponseYield`` of the last answer. A stage that is aborted or fails ends the chain."""

    def __init__(
        self,
        stages: Sequence[tuple[ChainStep, ChatAgent]],
        message: str,
        abort: AbortSignal | None,
        recorder: TraceRecorder,
    ) -> None:
        self._stages, self._message = list(stages), message
        self._abort, self._recorder = abort, recorder

    async def drive(self, send: Callable[[Any], Awaitable[Any]]) -> ResponseYield:
        async def events(item: Any) -> None:
            if isinstance(item, EventYield):  # (a run's text and raw items: its events carry them)
                await send(item)

        text = self._message
        for step, chat in self._stages:
            run = await chat.run(_fill(step.prompt, text), history=[], _abort_signal=self._abort)
            run.context.emitter.tap(self._recorder.record)
            run.context.emitter.connect(events)
            await run.run_to_end()
            result = run.state.result()
            text = result.text
            if result.terminated_by in ("aborted", "error"):
                break
        return ResponseYield(text, [])


class ConfiguredAgent(AsyncResource):
    """An agent from a config; use ``async with`` (one task opens and closes it).

    Args:
        config: The validated config.
        environ: Variables to read keys from instead of the environment.
        history: A conversation to continue.
    """

    def __init__(
        self,
        config: AgentConfig,
        *,
        environ: Mapping[str, str] | None = None,
        history: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.config = config
        self.environ = environ
        self.history: list[dict[str, Any]] = [dict(m) for m in history]
        self._stack: AsyncExitStack | None = None
        self._llm: LLMInterface | None = None
        self._recorder: TraceRecorder | None = None
        self.memory: ScopedStore | None = None
        self.toolkit: list[Any] = []
        self.checkpoints: CheckpointManager | None = None
        self._chat: ChatFunction | None = None
        self._stages: list[tuple[ChainStep, ChatAgent]] = []
        self._in_graph = False  # a handoff target: the graph's entry agent opens its handoffs

    # -- lifecycle ---------------------------------------------------------------------------

    async def open(self) -> None:
        """Open the model, tools, memory and trace sinks.

        Raises:
            ConfigError: For a model or store that cannot be used.
            MCPError: When an MCP server cannot be started.
            KernelError: When the Python kernel cannot be started.
        """
        if self._stack is not None:
            raise UserError("the agent is open already")
        stack = AsyncExitStack()
        await stack.__aenter__()
        self._stack = stack
        try:
            await self._open(stack)
        except BaseException:  # boundary: cleanup, re-raised: what was opened is closed
            await self.aclose()
            raise

    async def _open(self, stack: AsyncExitStack) -> None:
        config = self.config
        self._llm = await stack.enter_async_context(build_llm(config.model, self.environ))
        self._recorder = await build_recorder(config, stack)
        hooks: list[RunHook] = []
        memory = await build_memory(config, self._llm, stack)
        if memory is not None:
            self.memory, hook = memory
            hooks.append(hook)
        if config.checkpoints.dir:
            self.checkpoints = CheckpointManager(config.checkpoints.dir, config.checkpoints.max)
            if config.checkpoints.every:
                every = config.checkpoints.every
                hooks.append(
                    CheckpointHook(
                        self.checkpoints, every=every, memory=self.memory, recorder=self._recorder
                    )
                )
        if config.kind in ("group", "parallel"):
            members = await self._open_members(config.agents, stack)
            if config.kind == "group":
                self._chat = group_chat(config, members, self._llm)
            else:
                self._chat = parallel_chat(config, members)
            return
        if config.kind == "chain":
            self._stages = [
                (step, self._chat_function(step.system or config.system, [], hooks))
                for step in config.chain
            ]
            return
        self.toolkit = await build_toolkit(config, stack, self.environ)
        agent = self._chat_function(config.system, self.toolkit, hooks)
        self._chat = agent
        if config.handoffs and not self._in_graph:
            self._chat = await self._open_handoffs(agent, stack)

    async def _open_members(
        self, paths: Sequence[str], stack: AsyncExitStack
    ) -> dict[str, ChatAgent]:
        """Open the agents of other config files (closed with this one), by name.

        Raises:
            ConfigError: For a bad member config, or two members of one name.
        """
        members: dict[str, ChatAgent] = {}
        for path in paths:
            config = load_agent_config(path, environ=self.environ)
            if config.name in members or config.name == self.config.name:
                raise ConfigError(f"{path}: another agent is named {config.name!r} already")
            member = await stack.enter_async_context(ConfiguredAgent(config, environ=self.environ))
            members[config.name] = _team_member(path, config, member._chat)
        return members

    async def _open_handoffs(self, entry: ChatAgent, stack: AsyncExitStack) -> ChatFunction:
        """The chat of the handoff graph this agent enters: every agent reachable through
        ``handoffs:`` (each config file opened once, known by its name). An agent hands off to
        its own ``handoffs:``; one without any hands back to the agents that hand off to it.
        Loops in the graph are bounded by ``limits.max_handoffs`` (this agent's).

        Raises:
            ConfigError: For a bad target config, or two files of one agent name.
        """
        agents: dict[str, ChatAgent] = {self.config.name: entry}
        files: dict[str, str] = {}
        edges: list[tuple[str, str]] = []
        pending = [self.config]
        while pending:
            source = pending.pop(0)
            for path in source.handoffs:
                config = load_agent_config(path, environ=self.environ)
                name = config.name
                if name not in agents:
                    member = ConfiguredAgent(config, environ=self.environ)
                    member._in_graph = True
                    await stack.enter_async_context(member)
                    agents[name], files[name] = _team_member(path, config, member._chat), path
                    pending.append(config)
                elif files.get(name, path) != path:
                    raise ConfigError(f"{path}: another agent is named {name!r} already")
                if (source.name, name) not in edges:
                    edges.append((source.name, name))
        routes = {
            agent: [t for s, t in edges if s == agent] or [s for s, t in edges if t == agent]
            for agent in agents
        }
        return handoff_chat(self.config.name, agents, routes, self.config.limits.max_handoffs)

    async def aclose(self) -> None:
        """Close everything the agent opened (in reverse order)."""
        stack, self._stack = self._stack, None
        self._chat, self._stages = None, []
        if stack is not None:
            await stack.aclose()

    # -- parts -------------------------------------------------------------------------------

    @property
    def llm(self) -> LLMInterface:
        """The model interface.

        Raises:
            UserError: If the agent is not open.
        """
        if self._llm is None:
            raise UserError("the agent is not open; use 'async with'")
        return self._llm

    @property
    def recorder(self) -> TraceRecorder:
        """The trace of every turn so far.

        Raises:
            UserError: If the agent is not open.
        """
        if self._recorder is None:
            raise UserError("the agent is not open; use 'async with'")
        return self._recorder

    @property
    def chat_function(self) -> ChatFunction:
        """The open agent's own ``@llm_chat`` function (``stream=True, enable_event=True``),
        not traced: what a durable worker wraps in a ``DurableAgent``. Front ends and session
        stores take :meth:`chat` (traced, chains included).

        Raises:
            UserError: If the agent is not open, or is a chain (one function per stage).
        """
        if self._chat is None:
            which = "a chain agent has one per stage" if self._stages else "it is not open"
            raise UserError(f"the agent has no chat function: {which}")
        return self._chat

    async def tool_names(self) -> list[str]:
        """The names of the tools the model sees (MCP servers are asked)."""
        names: list[str] = []
        for item in self.toolkit:
            if isinstance(item, Tool):
                names.append(item.name)
            else:
                names.extend(tool.name for tool in await item.list_tools())
        return names

    def _chat_function(self, system: str, tools: list[Any], hooks: list[RunHook]) -> ChatAgent:
        """An ``@llm_chat`` agent with ``system`` as its prompt (a simple agent has no tools,
        a chain stage neither)."""

        async def agent(message: str, history: list[dict[str, Any]] | None = None) -> None:
            """(replaced by the system prompt)"""

        agent.__doc__ = system
        decorate = llm_chat(
            self.llm,
            toolkit=tools or None,
            stream=True,
            enable_event=True,
            hooks=tuple(hooks),
            options=build_options(self.config, tools=bool(tools)),
        )
        return decorate(agent)

    # -- running -----------------------------------------------------------------------------

    async def run(
        self,
        text: str,
        *,
        abort: AbortSignal | None = None,
        observer: RunObserver | None = None,
        history: Sequence[Mapping[str, Any]] | None = None,
    ) -> TurnResult:
        """Run one turn on ``text``; the conversation goes on from the agent's history.

        Args:
            text: The user's message.
            abort: Aborts the turn (its history stays valid).
            observer: Learns the turn's events.
            history: Continue this conversation instead, leaving the agent's own untouched
                (one agent serving many sessions); a chain agent ignores it.

        Raises:
            UserError: If the agent is not open.
            ProviderError: When the model fails after retries.
        """
        observer = observer or RunObserver()
        timeout = self.config.limits.run_timeout
        if timeout is None:
            return await self._run(text, abort, observer, history)
        abort = abort or AbortSignal()
        failure: Exception | None = None
        async with anyio.create_task_group() as group:
            group.start_soon(_abort_after, abort, timeout)
            try:
                result = await self._run(text, abort, observer, history)
            except Exception as exc:  # boundary: the failure, raised below as it is (no group)
                failure = exc
            finally:
                group.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return result

    async def _run(
        self,
        text: str,
        abort: AbortSignal | None,
        observer: RunObserver,
        history: Sequence[Mapping[str, Any]] | None,
    ) -> TurnResult:
        if self._stages:
            return await self._run_chain(text, abort, observer)
        if self._chat is None:
            raise UserError("the agent is not open; use 'async with'")
        if history is not None:
            return await self._turn(self._chat, text, [dict(m) for m in history], abort, observer)
        result = await self._turn(self._chat, text, self.history, abort, observer)
        self.history = result.history
        return result

    async def chat(
        self,
        message: str | None,
        history: list[dict[str, Any]] | None = None,
        **call_options: Any,
    ) -> AsyncIterator[Any]:
        """One turn as the items of an ``enable_event=True`` ``@llm_chat`` call: its events,
        then a ``ResponseYield`` with the conversation after the turn. The agent's own
        ``history`` is left untouched (one agent serving many sessions: a
        :class:`~simplellmfunc.serving.SessionStore` takes this method as its agent,
        as ``simplellmfunc serve`` and :func:`simplellmfunc.serving.web_chat_app` do).

        Args:
            message: The user's message; ``None``: continue ``history`` as it is (it ends
                with a user message or tool results; not for a chain agent).
            history: The conversation to continue (a chain agent ignores it).
            **call_options: Per-call options of the ``@llm_chat`` call (``_abort_signal``,
                ``_session_id``, ``_toolkit``, ``_hooks``).

        Raises:
            UserError: If the agent is not open.
        """
        if self._stages:
            if message is None:
                raise UserError("a chain agent has no history to continue")
            async for item in self._chain_items(message, call_options.get("_abort_signal")):
                yield item
            return
        if self._chat is None:
            raise UserError("the agent is not open; use 'async with'")
        if message is None:  # continue the history as it is (a client's tool results)
            resume = self._chat.resume  # type: ignore[attr-defined]
            items = resume(list(history or []), **call_options)
        else:
            items = self._chat(message, history=list(history or []), **call_options)
        async for item in self.recorder.wrap(items):
            yield item

    async def turn_run(
        self,
        message: str | None,
        history: list[dict[str, Any]] | None = None,
        **call_options: Any,
    ) -> Run | ChainTurn | TeamTurn | AsyncIterator[Any]:
        """One turn for a caller that drives it (a session store): what :meth:`chat` yields,
        as something the caller runs in its own task, so that the turn crosses one event
        pump (the caller's), with the trace recorder tapped on the way:

        * an agent of one ``@llm_chat`` function (``simple``, ``react`` without handoffs):
          its engine :class:`~simplellmfunc.engine.Run`, not started, the recorder tapped on
          its emitter (:meth:`~simplellmfunc.engine.Emitter.tap`); the driver connects its
          own sink;
        * a chain: a ``ChainTurn``, a team (``group``, ``parallel``, handoffs): a
          ``TeamTurn``; the driver awaits
          ``drive(send)``, which runs the stages' engine runs (or plays the team) with
          their events sent to ``send``, and gets the ``ResponseYield``;
        * a team asked to continue a history (``message=None``): its :meth:`chat` items.

        The agent's own ``history`` is left untouched.

        Args:
            message: The user's message; ``None``: continue ``history`` as it is.
            history: The conversation to continue (a chain agent ignores it).
            **call_options: Per-call options of the ``@llm_chat`` call (``_abort_signal``,
                ``_session_id``, ``_toolkit``, ``_hooks``; a chain's and a team's stages take
                the abort signal only).

        Raises:
            UserError: If the agent is not open, or a chain is asked to continue a history.
        """
        abort = call_options.get("_abort_signal")
        if self._stages:
            if message is None:
                raise UserError("a chain agent has no history to continue")
            return ChainTurn(self._stages, message, abort, self.recorder)
        chat = self._chat
        if isinstance(chat, TeamChat) and message is not None:
            return chat.turn(message, history, abort, self.recorder.record)
        if not isinstance(chat, ChatAgent):
            return self.chat(message, history, **call_options)
        recorder = self.recorder
        if message is None:  # continue the history as it is (a client's tool results)
            run = await chat.run(history=list(history or []), _resume=True, **call_options)
        else:
            run = await chat.run(message, history=list(history or []), **call_options)
        run.context.emitter.tap(recorder.record)
        return run

    async def _chain_items(self, text: str, abort: AbortSignal | None) -> AsyncIterator[Any]:
        for step, chat in self._stages:
            ended = "answer"
            items = chat(_fill(step.prompt, text), history=[], _abort_signal=abort)
            async for item in self.recorder.wrap(items):
                if is_response_yield(item):
                    text = str(item.response)
                    continue
                if is_event_yield(item) and isinstance(item.event, ReactEndEvent):
                    ended = item.event.terminated_by
                yield item
            if ended in ("aborted", "error"):
                break
        yield ResponseYield(text, [])

    async def _run_chain(
        self, text: str, abort: AbortSignal | None, observer: RunObserver
    ) -> TurnResult:
        result = TurnResult(text, [], "answer")
        for index, (step, chat) in enumerate(self._stages):
            await observer.stage(index, len(self._stages), step.name or f"stage {index + 1}")
            result = await self._turn(chat, _fill(step.prompt, result.text), [], abort, observer)
            if result.terminated_by in ("aborted", "error"):
                break
        return result

    async def _turn(
        self,
        chat: ChatFunction,
        text: str,
        history: list[dict[str, Any]],
        abort: AbortSignal | None,
        observer: RunObserver,
    ) -> TurnResult:
        answer, messages, ended = "", history, "answer"
        items = chat(text, history=history, _abort_signal=abort)
        async for item in self.recorder.wrap(items):
            if is_event_yield(item):
                if isinstance(item.event, ReactEndEvent):
                    ended = item.event.terminated_by
                await observer.event(item)
            elif is_response_yield(item):
                answer, messages = str(item.response), list(item.messages)
        return TurnResult(answer, messages, ended)

    # -- checkpoints -------------------------------------------------------------------------

    def _manager(self) -> CheckpointManager:
        if self.checkpoints is None:
            directory = Path.cwd() / ".simplellmfunc" / "checkpoints" / self.config.name
            self.checkpoints = CheckpointManager(directory, self.config.checkpoints.max)
        return self.checkpoints

    async def save_checkpoint(self, description: str = "") -> CheckpointInfo:
        """Save the conversation, memory and trace (``checkpoints.dir``, else
        ``./.simplellmfunc/checkpoints/<name>``).

        Raises:
            RunError: If the file cannot be written or the store fails.
        """
        checkpoint = await Checkpoint.capture(
            history=self.history,
            memory=self.memory,
            recorder=self.recorder,
            description=description,
            metadata={"agent": self.config.name},
        )
        return await self._manager().save(checkpoint)

    async def load_checkpoint(self, number: int | None = None) -> Checkpoint:
        """Restore the conversation, memory and trace of checkpoint ``number`` (default: the
        newest).

        Raises:
            ConfigError: If there is no such checkpoint, or its major version differs.
            RunError: If the file cannot be read or the store fails.
        """
        checkpoint = await self._manager().load(number)
        self.history = [dict(m) for m in checkpoint.history]
        if self.memory is not None:
            await checkpoint.restore_memory(self.memory)
        checkpoint.restore_trace(self.recorder)
        return checkpoint


def _team_member(path: str, config: AgentConfig, chat: ChatFunction | None) -> ChatAgent:
    """A member's ``@llm_chat`` function (a team's member is one agent: a chain, group,
    parallel or handing-off agent is not).

    Raises:
        ConfigError: If the member is none.
    """
    if not isinstance(chat, ChatAgent):
        which = "handing-off" if config.handoffs and config.kind == "react" else config.kind
        raise ConfigError(f"{path}: a {which} agent cannot be a member of this team")
    return chat


async def _abort_after(abort: AbortSignal, timeout: float) -> None:
    """``limits.run_timeout``: abort the run (its history stays valid) once it has taken
    ``timeout`` seconds."""
    await anyio.sleep(timeout)
    abort.abort(f"timed out after {timeout:g} s (limits.run_timeout)")
