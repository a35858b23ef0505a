"""What a reply means for the run: tool calls to run, or an answer and why the run stops.

Native tools: the reply's tool calls, if any, else the answer. Text protocol: the calls parsed
from the reply (``._text_protocol``), a ``terminate`` action, or a format error sent back as an
observation. In both, an implicit termination signal (``TerminationPolicy``) ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._events import TerminatedBy
from .._messages import AssistantMessage, ToolCall
from .._mutations import ContextMutation, UserMessageMutation
from ._invocation import Invocation
from ._json_protocol import parse_step
from ._text_protocol import parse_reply

__all__ = ["ReplyPlan", "plan_reply"]


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """The calls to run; else the answer, why the run stops, or feedback to send back."""

    calls: tuple[ToolCall, ...] = ()
    answer: str = ""
    terminated_by: TerminatedBy = "answer"
    feedback: ContextMutation | None = None


def plan_reply(
    invocation: Invocation,
    message: AssistantMessage,
    iteration: int,
    *,
    final: TerminatedBy | None = None,
) -> ReplyPlan:
    """Decide what ``message`` asks for (``final``: why this was a forced final-answer call:
    ``"max_steps"`` at the step cap, ``"answer"`` after a repeated call)."""
    text = message.content or ""
    if invocation.json_protocol:
        return _json_plan(text, iteration, final=final)
    if final is not None:
        return ReplyPlan(answer=text, terminated_by=final)
    text_mode = invocation.text_protocol
    implicit = invocation.options.termination.implicit_stop(text, text_protocol=text_mode)
    if not text_mode:
        if not message.tool_calls:
            return ReplyPlan(answer=text)
        if implicit:
            return ReplyPlan(answer=text, terminated_by="implicit")
        return ReplyPlan(calls=message.tool_calls)
    parsed = parse_reply(
        text,
        [t.name for t in invocation.tools],
        keyword_heuristic=invocation.options.keyword_heuristic,
    )
    if parsed.terminate_answer is not None:
        return ReplyPlan(answer=parsed.terminate_answer, terminated_by="terminate")
    if implicit:
        return ReplyPlan(answer=text, terminated_by="implicit")
    if parsed.format_error is not None:
        return ReplyPlan(
            feedback=UserMessageMutation({"role": "user", "content": parsed.format_error})
        )
    if not parsed.actions:
        return ReplyPlan(answer=text)
    calls = tuple(
        ToolCall(f"call_{iteration}_{n}", action.tool, action.arguments())
        for n, action in enumerate(parsed.actions)
    )
    return ReplyPlan(calls=calls)


def _json_plan(text: str, iteration: int, *, final: TerminatedBy | None) -> ReplyPlan:
    """A JSON-protocol step: one call, or the answer (unwrapped from its JSON)."""
    step = parse_step(text)
    if step.answer is not None:
        return ReplyPlan(answer=step.answer, terminated_by=final or "answer")
    if final is not None:  # the schema allowed only an answer: keep what came
        return ReplyPlan(answer=text, terminated_by=final)
    if step.error is not None:
        return ReplyPlan(feedback=UserMessageMutation({"role": "user", "content": step.error}))
    return ReplyPlan(calls=(ToolCall(f"call_{iteration}_0", step.tool, step.arguments),))
