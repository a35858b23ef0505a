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
    invocation: Invocation, message: AssistantMessage, iteration: int, *, final: bool
) -> ReplyPlan:
    """Decide what ``message`` asks for (``final``: the forced final-answer call)."""
    text = message.content or ""
    if final:
        return ReplyPlan(answer=text, terminated_by="max_steps")
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
