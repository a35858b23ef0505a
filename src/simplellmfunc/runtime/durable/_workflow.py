"""The one DBOS workflow: run a registered agent with its LLM and tool calls as steps.

Every durable run, started here or taken from a queue by a worker, is this workflow with the
agent's name and its arguments as inputs; a process resuming or dequeuing a run finds the agent
by name in its own registry, so every process that runs sessions registers the same agents.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextlib import AbstractContextManager, aclosing, nullcontext
from dataclasses import dataclass
from typing import Any

from dbos import DBOS

from ..._events import EventYield, ResponseYield
from ...engine import running_steps
from ...exceptions import DurableError
from ..otel import GenAITracing
from ._local import local_abort
from ._result import DurableResult
from ._runner import RESUME_NOTE, DBOSStepRunner

__all__ = ["WORKFLOW_NAME", "AgentEntry", "durable_workflow", "register_agent"]

WORKFLOW_NAME = "simplellmfunc.durable_run"

EventCallback = Callable[[EventYield], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class AgentEntry:
    """A registered agent: the decorated function and what the workflow does around it."""

    func: Callable[..., Any]
    on_event: EventCallback | None = None
    resume_note: bool = True
    tracing: GenAITracing | None = None
    park_after: float | None = None


_AGENTS: dict[str, AgentEntry] = {}
_REGISTERED: list[Callable[..., Coroutine[Any, Any, DurableResult]]] = []


def register_agent(name: str, entry: AgentEntry) -> None:
    """Make ``name`` runnable as a durable run in this process.

    Raises:
        DurableError: If another function is registered under ``name``.
    """
    known = _AGENTS.get(name)
    if known is not None and known.func is not entry.func:
        raise DurableError(f"two durable agents are named {name!r}")
    _AGENTS[name] = entry


def durable_workflow() -> Callable[..., Coroutine[Any, Any, DurableResult]]:
    """The workflow function, registered with DBOS on first use (before DBOS launches)."""
    if not _REGISTERED:
        _REGISTERED.append(DBOS.workflow(name=WORKFLOW_NAME)(_run_agent))
    return _REGISTERED[0]


async def _run_agent(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], carrier: Mapping[str, str]
) -> DurableResult:
    entry = _AGENTS.get(name)
    if entry is None:
        raise DurableError(f"no durable agent named {name!r} is registered in this process")
    workflow_id = DBOS.workflow_id or ""
    note = RESUME_NOTE if entry.resume_note else None
    runner = DBOSStepRunner(workflow_id, note, entry.park_after)
    # Approvals are answered durably (DurableHandle.answer, DurableClient.answer) unless the
    # caller gave an approver of its own.
    kwargs = {"_approver": runner.approve, **kwargs}
    with local_abort(workflow_id) as abort, running_steps(runner), _traced(entry, name, carrier):
        text, history, value = await _drive(entry, args, {**kwargs, "_abort_signal": abort})
    return DurableResult(
        workflow_id, text, history, value, runner.resumed, runner.replayed, runner.executed
    )


def _traced(
    entry: AgentEntry, name: str, carrier: Mapping[str, str]
) -> AbstractContextManager[None]:
    """The run's ``invoke_agent`` span, a child of the caller's context (``carrier``), in
    whichever process runs or resumes it."""
    if entry.tracing is None:
        return nullcontext()
    return entry.tracing.agent_run(name, carrier, conversation_id=DBOS.workflow_id)


async def _drive(
    entry: AgentEntry, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, list[dict[str, Any]] | None, Any]:
    """Call the decorated function to the end: ``(text, history, value)``."""
    produced = entry.func(*args, **kwargs)
    if inspect.isawaitable(produced):  # @llm_function
        return "", None, await produced
    text, history, value = "", None, None
    async with aclosing(produced) as items:
        async for item in items:  # @llm_chat: (text, history) items, or events
            if isinstance(item, EventYield):
                await _deliver(entry.on_event, item)
            elif isinstance(item, ResponseYield):
                value = item.response
                text = value if isinstance(value, str) else ""
                history = list(item.messages)
            elif isinstance(item, tuple) and len(item) == 2:
                text = item[0] if isinstance(item[0], str) and item[0] else text
                history = list(item[1])
    return text, history, value


async def _deliver(callback: EventCallback | None, item: EventYield) -> None:
    if callback is None:
        return
    outcome = callback(item)
    if inspect.isawaitable(outcome):
        await outcome
