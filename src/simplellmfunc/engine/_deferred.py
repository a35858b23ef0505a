"""Deferred (client-side) tools: calls the app or the client runs, outside the engine.

A :class:`DeferredTool` is offered to the model like any tool, but a call of it is not run: the
iteration's other calls run as usual, then the run ends with ``terminated_by="deferred"`` and
the pending calls in :attr:`RunResult.pending`. The history then ends with the assistant's calls
(valid with pending calls); :func:`answer_deferred` adds the app's results, and a new run over
that history (``agent.resume(history, results)``) continues it. An abort or a loop stop answers
the pending calls with a cancellation, so the history is valid at every point.

The hook in the loop is :func:`act_or_defer`, which :class:`~._run.Run` calls instead of
``act`` for an iteration's tool calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._events import ReactIterationEndEvent
from .._messages import (
    AssistantMessage,
    ToolCall,
    ToolMessage,
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    validate_history,
)
from .._mutations import ToolCancelledMutation
from ..exceptions import InvalidHistoryError, UserError
from ..tools import Tool
from ._invocation import Invocation, RunContext
from ._phases import act

__all__ = ["DeferredTool", "act_or_defer", "answer_deferred", "pending_calls"]


class DeferredTool(Tool):
    """A tool the app or the client executes: the run stops at its calls and hands them over.

    Args:
        name: The tool's name (as providers accept it).
        description: What it does, for the model.
        parameters: The JSON schema of its arguments (an object schema).

    Raises:
        ToolDefinitionError: For an invalid name.
    """

    deferred = True

    def __init__(
        self, name: str, description: str = "", parameters: Mapping[str, Any] | None = None
    ) -> None:
        self._parameters = dict(parameters or {"type": "object", "properties": {}})
        super().__init__(name=name, description=description or f"The client's {name} tool.")

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments, as given."""
        return self._parameters

    async def run(self, **kwargs: Any) -> Any:
        """Never called by a run (its calls are handed over); calling it directly refuses.

        Raises:
            UserError: Always.
        """
        raise UserError(f"{self.name!r} is a deferred tool: the app runs its calls")


def _is_deferred(invocation: Invocation, call: ToolCall) -> bool:
    return getattr(invocation.tool_named(call.name), "deferred", False) is True


async def act_or_defer(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """The tool phase with deferred calls handed over: the others run (``act``), then the run
    ends ``"deferred"`` with the deferred calls pending; returns whether the run is over."""
    invocation = run.invocation
    deferred = tuple(c for c in calls if _is_deferred(invocation, c))
    if not deferred:
        return await act(run, calls)
    local = tuple(c for c in calls if not _is_deferred(invocation, c))
    state = run.state
    over = await act(run, local) if local else run.aborted()
    if over:  # aborted, or stopped in a loop: nobody will answer the deferred calls
        reason = state.abort_reason or state.terminated_by
        state.transcript.apply_all([ToolCancelledMutation(c.id, c.name, reason) for c in deferred])
        return True
    state.terminated_by = "deferred"
    state.pending = deferred
    state.final_text = _last_text(state.transcript.messages)
    if not local and run.emitter.wants_events:
        await run.emitter.event(ReactIterationEndEvent(state.iteration, 0))
    return True


def _last_text(messages: Sequence[Any]) -> str:
    last = messages[-1] if messages else None
    if isinstance(last, AssistantMessage):
        return last.content or ""
    for message in reversed(messages):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            return message.content or ""
    return ""


def pending_calls(history: Sequence[Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    """The calls of ``history``'s last assistant message that have no result yet.

    Raises:
        InvalidHistoryError: If the history is not valid (pending calls allowed).
    """
    messages = [message_from_dict(m) for m in history]
    validate_history(messages, allow_pending_calls=True)
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
        elif isinstance(message, AssistantMessage):
            return tuple(c for c in message.tool_calls if c.id not in answered)
        else:
            return ()
    return ()


def answer_deferred(
    history: Sequence[Mapping[str, Any]], results: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """``history`` (ending with pending calls) with a tool result per pending call, in call
    order: ``results`` maps each call id to its result (text, or content parts).

    Raises:
        InvalidHistoryError: If a pending call has no result, a result answers no pending
            call, or the result history is not valid.
    """
    pending = pending_calls(history)
    ids = [c.id for c in pending]
    unknown = sorted(set(results) - set(ids))
    if unknown:
        raise InvalidHistoryError(f"results for calls that are not pending: {unknown}")
    missing = [i for i in ids if i not in results]
    if missing:
        raise InvalidHistoryError(f"pending calls without a result: {missing}")
    answered = [*(dict(m) for m in history)]
    for call_id in ids:
        value = results[call_id]
        content = value if isinstance(value, str | list) else str(value)
        answered.append({"role": "tool", "tool_call_id": call_id, "content": content})
    return history_to_dicts(history_from_dicts(answered))
