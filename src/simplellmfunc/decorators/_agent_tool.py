"""An ``@llm_chat`` agent run under another run: :func:`agent_run`, and :class:`AgentTool`.

:func:`agent_run` prepares the run a call of the agent would iterate (through the agent's
``prepare_call``) and, given an emitter to stream into, makes it a sub-run: its events go into
that stream tagged with the agent's name (``origin.agent``) and depth (``origin.fork_depth``),
the caller's call id as their parent. The multi-agent runtime drives handoffs, group chats and
parallel runs with it; :class:`AgentTool` (``agent.as_tool()``) runs an agent inside a tool call
of another agent's run (:func:`~simplellmfunc.engine.current_run`): events into the caller's
stream, usage into the caller's total, the caller's abort stopping it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from .._abort import AbortSignal, PauseSignal
from .._events import EventOrigin
from ..engine import (
    Emitter,
    Run,
    RunContext,
    RunResult,
    current_run,
    current_tool_call_id,
    new_call_id,
)
from ..exceptions import UserError
from ..tools import TaskTool, Tool, ToolContext

__all__ = ["AgentTool", "agent_description", "agent_name", "agent_run", "run_under"]


def agent_name(agent: Callable[..., Any]) -> str:
    """The name an ``@llm_chat`` agent goes by (its function's name)."""
    return str(getattr(agent, "__name__", "agent"))


def agent_description(agent: Callable[..., Any]) -> str:
    """What an ``@llm_chat`` agent does, for other agents and clients: the first line of its
    docstring (its system prompt), or ``""``."""
    doc = (getattr(agent, "__doc__", None) or "").strip().splitlines()
    return doc[0].strip() if doc else ""


async def agent_run(
    agent: Callable[..., Any],
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
    """The run of ``agent(*args, history=history, **kwargs)``, not started.

    Args:
        agent: An ``@llm_chat`` function.
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
        UserError: If ``agent`` is not an ``@llm_chat`` function.
    """
    prepare = _prepare_call(agent)
    if resume:
        invocation, transcript = await prepare(_resume_history=history or [], **kwargs)
    elif history is not None:
        invocation, transcript = await prepare(*args, history=history, **kwargs)
    else:
        invocation, transcript = await prepare(*args, **kwargs)
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
        agent=name or agent_name(agent),
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
        agent: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> None:
        _prepare_call(agent)  # refuses anything but an @llm_chat agent, now
        self.agent = agent
        text = description or agent_description(agent) or f"Ask the agent {agent_name(agent)!r}."
        super().__init__(name or agent_name(agent), text, timeout=timeout)

    async def answer(self, task: str, context: ToolContext | None) -> str:
        """Run the agent on ``task`` and return its final text.

        Raises:
            ProviderError: When the agent's model fails.
        """
        result = await run_under(self.agent, current_run(), task, name=self.name)
        return result.text


async def run_under(
    agent: Callable[..., Any],
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


def _prepare_call(agent: Callable[..., Any]) -> Callable[..., Any]:
    """``agent.prepare_call``, or a :class:`UserError` if ``agent`` is not an ``@llm_chat``."""
    prepare = getattr(agent, "prepare_call", None)
    if prepare is None:
        raise UserError(f"{agent!r} is not an @llm_chat agent (it has no prepare_call)")
    return prepare  # type: ignore[no-any-return]
