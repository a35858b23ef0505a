"""A fork's child agent: how it is built from its parent's running turn, run, and reported.

With ``_instance`` (a bound agent's forks) this is one of the two modules of ``selfref`` that
drive the engine, through its public run API only (:meth:`simplellmfunc.engine.Run.child_of`):
``_forks`` schedules children without touching the engine.

The child is the parent's ``@llm_chat`` configuration (model, tools, system prompt, hooks) with:

* its own memory key ``<parent key>::fork::<n>``, seeded with the parent's experiences;
* a transcript made of the parent's context *before* the fork call — the assistant message whose
  tool calls are running now is left out, so the child never sees a pending tool-call scene —
  plus one user message carrying the task and the instruction;
* a fresh PyRepl per PyRepl of the parent's toolkit (:func:`~..pyrepl.fork_repl_tools`), so no
  kernel state is shared;
* an abort signal linked to the parent's; as a child run of the parent's, its events stream into
  the parent's stream with ``origin.fork_id`` / ``origin.fork_depth``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
from pydantic import TypeAdapter, ValidationError

from ..._abort import AbortSignal
from ..._events import ReactEvent
from ..._messages import AssistantMessage, Message, UserMessage, history_to_dicts
from ..._transcript import Transcript
from ..._usage import Usage
from ...engine import Run, RunContext, RunHook, RunView
from ...exceptions import UserError
from ..pyrepl import ReplBackend, fork_repl_tools

__all__ = [
    "Fork",
    "ForkStatus",
    "ParentRun",
    "fork_id_list",
    "fork_prompt",
    "pre_fork_messages",
    "reply_result",
    "run_fork",
]

ForkStatus = Literal["queued", "running", "completed", "failed", "cancelled"]

_STRUCTURED: TypeAdapter[dict[str, Any] | list[Any]] = TypeAdapter(dict[str, Any] | list[Any])


def _noop() -> None:
    return None


@dataclass(slots=True, eq=False)
class Fork:
    """One child agent: how it runs, and (once done) how it ended.

    Mutable on purpose: the manager and :func:`run_fork` update the outcome fields as it runs.
    """

    fork_id: str
    key: str
    depth: int
    task: str
    prompt: str
    run: Run
    abort: AbortSignal
    repls: tuple[ReplBackend, ...]
    unlink: Callable[[], None] = _noop
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    status: ForkStatus = "queued"
    response: str | None = None
    error: str | None = None
    terminated_by: str | None = None
    usage: Usage = field(default_factory=Usage)
    messages: tuple[Message, ...] = ()

    async def emit(self, event: ReactEvent) -> None:
        """Send ``event`` into the parent's stream, as the child's."""
        await self.run.context.emitter.event(event)

    def report(self, include_history: bool = False) -> dict[str, Any]:
        """The fork's result as the parent's code sees it (JSON-shaped)."""
        completed = self.status == "completed"
        out: dict[str, Any] = {
            "fork_id": self.fork_id,
            "memory_key": self.key,
            "depth": self.depth,
            "task": self.task,
            "status": self.status,
            "response": self.response if completed else None,
            "result": reply_result(self.response) if completed else None,
            "error": self.error,
            "terminated_by": self.terminated_by,
            "usage": self.usage.to_dict(),
            "history_count": len(self.messages),
            "history_included": include_history,
        }
        if include_history:
            out["history"] = history_to_dicts(self.messages)
        return out

    def handle(self) -> dict[str, Any]:
        """What the parent key stores about the fork once it has ended."""
        return {
            "status": self.status,
            "error": self.error,
            "usage": self.usage.to_dict(),
        }


def structured(text: str | None) -> dict[str, Any] | list[Any] | None:
    """The JSON object or array a reply consists of (optionally in a ```json fence), else None."""
    body = (text or "").strip()
    if body.startswith("```") and body.endswith("```") and len(body) > 6:
        body = body[3:-3].strip()
        if body.startswith("json"):
            body = body[4:].strip()
    if not body or body[0] not in "{[":
        return None
    try:
        return _STRUCTURED.validate_json(body)
    except ValidationError:
        return None


def reply_result(response: Any) -> Any:
    """A fork's ``result``: its reply parsed as JSON when it is JSON text, else the reply."""
    parsed = structured(response) if isinstance(response, str) else None
    return parsed if parsed is not None else response


def fork_id_list(value: Any) -> list[str]:
    """The fork ids of ``value``: an id, a fork handle (a dict with ``fork_id``), or a list.

    Raises:
        UserError: For anything else.
    """
    items = value if isinstance(value, list | tuple) else [value]
    ids = []
    for item in items:
        fork_id = item.get("fork_id") if isinstance(item, dict) else item
        if not isinstance(fork_id, str) or not fork_id:
            raise UserError(
                "fork_ids: give fork ids, fork handles (dicts with 'fork_id') or a list"
            )
        ids.append(fork_id)
    return ids


def pre_fork_messages(transcript: Transcript) -> tuple[Message, ...]:
    """The parent's context before the running tool batch (its assistant message left out)."""
    messages = transcript.messages
    if not transcript.pending_tool_calls:
        return messages
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], AssistantMessage):
            return messages[:index]
    return messages


def fork_prompt(task: str, instruction: str, fork_id: str, depth: int) -> str:
    """The user message that starts a child."""
    parts = [f"[Fork task]\n{task.strip()}"]
    if instruction.strip():
        parts.append(f"[Instruction]\n{instruction.strip()}")
    parts.append(
        f"[Fork note]\nYou are fork {fork_id} (depth {depth}) of the agent whose conversation is "
        "above: it handed you this task and runs on while you work. You have your own fresh "
        "Python REPL (the parent's variables are not there). Do only this task; your final "
        "reply is returned to the parent as your result (reply with JSON when it asks for "
        "structured data)."
    )
    return "\n\n".join(parts)


class ParentRun:
    """The parent's run as its forks see it: the view its SelfReference hook got at the start of
    the turn (whose transcript is the live one), and the run's context.

    Args:
        view: The run view of the turn's first hook call.
    """

    def __init__(self, view: RunView) -> None:
        self._view = view

    @property
    def fork_id(self) -> str | None:
        """The parent's own fork id (``None`` for a root agent)."""
        return self._view.invocation.fork_id

    @property
    def depth(self) -> int:
        """The parent's fork depth (0 for a root agent)."""
        return self._view.invocation.fork_depth

    def context(self) -> RunContext:
        """The run's context, with the task group forks run in.

        Raises:
            UserError: If the run has no task group (it is stepped, not driven by Run.run_to_end).
        """
        context = self._view.context
        if context is None or context.task_group is None:
            raise UserError(
                "forks need the run's task group: run the agent through @llm_chat or Run.run_to_end"
            )
        return context

    def start_soon(
        self, func: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: str
    ) -> None:
        """Run ``func(*args)`` in the run's task group (cancelled if the run ends first).

        Raises:
            UserError: If the run has no task group.
        """
        self.context().start_soon(func, *args, name=name)

    def add_usage(self, usage: Usage) -> None:
        """Count a child's usage in the run's total (also while the run is winding down)."""
        context = self._view.context
        if context is not None:
            context.add_usage(usage)

    def child(
        self, fork_id: str, key: str, task: str, prompt: str, hooks: tuple[RunHook, ...]
    ) -> Fork:
        """Build the child ``fork_id`` (nothing runs yet; see the module docstring).

        Raises:
            UserError: If the run has no task group.
            InvalidHistoryError: If the parent's context cannot start a new history.
        """
        view, context = self._view, self.context()
        parent = view.invocation
        depth = parent.fork_depth + 1
        transcript = Transcript([*pre_fork_messages(view.transcript), UserMessage(prompt)])
        tools, repls = fork_repl_tools(parent.tools)
        invocation = replace(
            parent,
            tools=tools,
            hooks=hooks,
            fork_id=fork_id,
            fork_depth=depth,
            parent_call_id=view.agent_call_id,
        )
        abort = AbortSignal()
        unlink = context.abort.add_callback(abort.abort) if context.abort is not None else _noop
        run = Run.child_of(context, invocation, transcript, abort=abort, user_input=task)
        return Fork(fork_id, key, depth, task, prompt, run, abort, repls, unlink)


async def run_fork(fork: Fork) -> None:
    """Run the child to its end and record how it ended; a failure is recorded, not raised.

    Usage and messages are recorded also when the child is cancelled.
    """
    run = fork.run
    try:
        await run.run_to_end()
    except Exception as exc:  # boundary: a fork's failure is reported to its parent, not raised
        fork.status = "failed"
        fork.error = f"{type(exc).__name__}: {exc}"
        fork.terminated_by = "error"
    else:
        result = run.state.result()
        fork.response = result.text
        fork.terminated_by = result.terminated_by
        if result.aborted:
            fork.status = "cancelled"
            fork.error = f"aborted: {result.abort_reason}"
        else:
            fork.status = "completed"
    finally:
        fork.usage = run.state.usage
        fork.messages = run.state.transcript.messages
