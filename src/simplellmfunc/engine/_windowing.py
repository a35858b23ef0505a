"""Apply a run's history window before each LLM call (see ``._window`` for the policy)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio.to_thread

from .._messages import Message, SystemMessage, UserMessage, message_to_dict
from .._mutations import ContextReplaceMutation
from ..providers._base import LLMRequest
from ..providers._tokens import count_message_tokens
from ._invocation import Invocation
from ._state import RunState
from ._window import apply_window, truncation_summary

__all__ = ["SUMMARY_INSTRUCTION", "windowed"]

SUMMARY_INSTRUCTION = (
    "Summarize the conversation below for the assistant who continues it: the user's goals, "
    "facts learned, decisions, tool results that still matter and open questions. Be concise."
)


async def windowed(invocation: Invocation, state: RunState) -> Sequence[Message] | None:
    """The messages to send under the invocation's history window (``None``: no window)."""
    window = invocation.history_window
    if window is None:
        return None
    budget = window.budget(invocation.llm.context_window)
    model = invocation.llm.model_name

    def count(messages: Sequence[Message]) -> int:
        return count_message_tokens(messages, model)

    messages = state.transcript.messages

    def fit(summary: str | None) -> tuple[tuple[Message, ...], list[Message]]:
        return apply_window(messages, window, count, budget, summary)

    # Token counting is CPU work (and the first use loads the encoding): off the event loop.
    sent, dropped = await anyio.to_thread.run_sync(fit, None)
    if dropped and window.strategy == "summarize":
        summary = await _summary(invocation, state, dropped)
        sent, dropped = await anyio.to_thread.run_sync(fit, summary)
    if dropped and window.rewrite_history:
        state.transcript.apply(ContextReplaceMutation([message_to_dict(m) for m in sent]))
        return None
    return sent if dropped else None


async def _summary(invocation: Invocation, state: RunState, dropped: list[Message]) -> str:
    """An LLM summary of the dropped messages, computed once per size of the dropped part."""
    cached = state.window_summary
    if cached is not None and cached[0] == len(dropped):
        return cached[1]
    request = LLMRequest(
        (SystemMessage(SUMMARY_INSTRUCTION), UserMessage(truncation_summary(dropped, 20_000)))
    )
    response = await invocation.llm.complete(request)
    state.usage = state.usage + response.usage
    text = f"[Summary of {len(dropped)} earlier messages]\n{response.text}"
    state.window_summary = (len(dropped), text)
    return text
