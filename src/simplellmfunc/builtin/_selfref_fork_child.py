"""How a fork's child agent is built from its parent's running turn, and how it is reported.

The child is the parent's ``@llm_chat`` configuration (model, tools, system prompt, hooks) with:

* its own memory key ``<parent key>::fork::<n>``, seeded with the parent's experiences;
* a transcript made of the parent's context *before* the fork call — the assistant message whose
  tool calls are running now is left out, so the child never sees a pending tool-call scene —
  plus one user message carrying the task and the instruction;
* a fresh PyRepl per PyRepl of the parent's toolkit (:func:`~.pyrepl.fork_repl_tools`), so no
  kernel state is shared;
* an abort signal linked to the parent's, and an emitter that streams the child's events into the
  parent's stream with ``origin.fork_id`` / ``origin.fork_depth``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.to_thread
from pydantic import TypeAdapter, ValidationError

from .._abort import AbortSignal
from .._events import EventOrigin
from .._messages import AssistantMessage, Message, UserMessage, history_to_dicts
from .._transcript import Transcript
from .._usage import Usage
from ..engine._emit import Emitter
from ..engine._invocation import Invocation
from ..engine._run_context import RunContext
from .pyrepl import ReplBackend, fork_repl_tools

if TYPE_CHECKING:
    from ._selfref_turn import Turn

__all__ = ["Fork", "ForkStatus", "build_fork", "pre_fork_messages"]

ForkStatus = Literal["queued", "running", "completed", "failed", "cancelled"]

_STRUCTURED: TypeAdapter[dict[str, Any] | list[Any]] = TypeAdapter(dict[str, Any] | list[Any])


def _noop() -> None:
    return None


@dataclass(slots=True, eq=False)
class Fork:
    """One child agent: how it runs, and (once done) how it ended.

    Mutable on purpose: the manager updates the outcome fields as the child runs.
    """

    fork_id: str
    key: str
    depth: int
    task: str
    prompt: str
    invocation: Invocation
    transcript: Transcript
    emitter: Emitter
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
            "result": structured(self.response) if completed else None,
            "error": self.error,
            "terminated_by": self.terminated_by,
            "usage": self.usage.to_dict(),
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


async def build_fork(turn: Turn, context: RunContext, task: str, instruction: str) -> Fork:
    """Register a fork of ``turn`` and build its child (nothing runs yet).

    Raises:
        InvalidHistoryError: If the parent's context cannot start a new history.
    """
    view, owner = turn.view, turn.owner
    parent = view.invocation
    depth = parent.fork_depth + 1
    messages = pre_fork_messages(view.transcript)
    fork_id, key = await anyio.to_thread.run_sync(owner.open_fork, turn.key, parent.fork_id, task)
    prompt = fork_prompt(task, instruction, fork_id, depth)
    transcript = Transcript([*messages, UserMessage(prompt)])
    tools, repls = fork_repl_tools(parent.tools)
    hooks = tuple(owner.run_hook(key) if h is turn.hook else h for h in parent.hooks)
    invocation = replace(
        parent,
        tools=tools,
        hooks=hooks,
        fork_id=fork_id,
        fork_depth=depth,
        parent_call_id=view.agent_call_id,
    )
    call_id = os.urandom(6).hex()
    origin = EventOrigin(context.origin.session_id, call_id, 0, view.agent_call_id, fork_id, depth)
    abort = AbortSignal()
    unlink = context.abort.add_callback(abort.abort) if context.abort is not None else _noop
    return Fork(
        fork_id,
        key,
        depth,
        task,
        prompt,
        invocation,
        transcript,
        context.emitter.derive(origin),
        abort,
        repls,
        unlink,
    )
