"""Runaway runs (seed 001 §1.3, §3.4): repeated tool calls and a step budget running low.

A model that repeats the same tool batch with the same arguments, or alternates between two,
burns its steps without learning anything. :func:`loop_period` spots it over the last
``EngineOptions.loop_window`` batches; the engine then tells the model in that batch's
observation, and if the next batch goes on repeating, it is not run: its calls are answered as
cancelled and the run ends with ``terminated_by="loop"``.

When ``max_tool_calls`` is set and few tool rounds are left, the observation says how many.
Both notes are appended to the last text tool result of the batch, so the history keeps its shape.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

from .._messages import ToolCall
from .._mutations import ContextMutation, ToolResultMutation

__all__ = [
    "LOOP_STOP_REASON",
    "Signature",
    "append_note",
    "budget_note",
    "loop_note",
    "loop_period",
    "signature",
]

Signature = tuple[tuple[str, str], ...]

LOOP_STOP_REASON = "not run: the same tool call(s) were repeated after a warning"


def signature(calls: Sequence[ToolCall]) -> Signature:
    """What identifies a batch: each call's name and its arguments in canonical JSON."""
    out = []
    for call in calls:
        arguments = call.arguments
        if arguments in _EMPTY:  # a call without arguments: canonical already
            arguments = "{}"
        else:
            try:
                arguments = json.dumps(json.loads(arguments), sort_keys=True)
            except ValueError:
                pass
        out.append((call.name, arguments))
    return tuple(out)


_EMPTY = frozenset(("", "{}"))


def loop_period(history: Sequence[Signature], window: int) -> int | None:
    """The period (1: the same batch again, 2: two batches alternating) of a repetition that
    fills the last ``window`` batches (two full periods at least); ``None`` if there is none."""
    if window <= 0:
        return None
    for period in (1, 2):
        span = max(window, 2 * period)
        if len(history) < span:
            continue
        tail = history[-span:]
        if all(tail[i] == tail[i - period] for i in range(period, span)):
            if period == 2 and tail[-1] == tail[-2]:
                continue  # that is period 1, reported above
            return period
    return None


def loop_note(calls: Sequence[ToolCall], period: int) -> str:
    """The warning for the model when its batches repeat."""
    names = ", ".join(sorted({c.name for c in calls}))
    what = "the same call" if period == 1 else "the same two calls in turn"
    return (
        f"[Loop warning] You have made {what} ({names}) with the same arguments several times; "
        "the results will not change. Use what you have, try something different, or give your "
        "final answer. Repeating it again ends the run."
    )


def budget_note(remaining: int) -> str:
    """The notice of a step budget running low."""
    rounds = "round" if remaining == 1 else "rounds"
    return f"[Step budget] {remaining} tool {rounds} left; then you must give your final answer."


def append_note(mutations: Sequence[ContextMutation], note: str) -> tuple[ContextMutation, ...]:
    """``mutations`` with ``note`` appended to the last text tool result (unchanged if none)."""
    out = list(mutations)
    for index in range(len(out) - 1, -1, -1):
        mutation = out[index]
        if isinstance(mutation, ToolResultMutation):
            out[index] = replace(mutation, content=f"{mutation.content}\n\n{note}")
            break
    return tuple(out)
