"""History window (seed 001 §2.4): keep the system prompt and the recent turns within a budget.

The window shapes what is *sent*; the run's transcript and the history returned to the caller
keep every message unless ``rewrite_history`` is set. A turn starts at a user message, so a tool
call always travels with its result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .._messages import AssistantMessage, Message, SystemMessage, UserMessage

__all__ = ["HistoryWindow", "apply_window", "split_turns", "truncation_summary"]

Counter = Callable[[Sequence[Message]], int]


@dataclass(frozen=True, slots=True)
class HistoryWindow:
    """Window settings for ``@llm_chat(history_window=...)``.

    Args:
        max_tokens: Token budget of the request (``None``: the model's context window minus
            ``reserve_tokens``, or no token limit if the window is unknown).
        keep_recent_turns: Turns always kept (at least the current one is kept).
        strategy: ``"truncate"`` (older turns become a short note) or ``"summarize"`` (an LLM
            summary of them, computed once per run).
        reserve_tokens: Room left for the reply when ``max_tokens`` is derived.
        rewrite_history: Also replace the older turns in the returned history.
    """

    max_tokens: int | None = None
    keep_recent_turns: int = 20
    strategy: Literal["truncate", "summarize"] = "truncate"
    reserve_tokens: int = 4096
    rewrite_history: bool = False

    def budget(self, context_window: int | None) -> int | None:
        """The token budget for a model with ``context_window``."""
        if self.max_tokens is not None:
            return self.max_tokens
        if context_window is None:
            return None
        return max(context_window - self.reserve_tokens, 1)


def split_turns(messages: Sequence[Message]) -> tuple[list[Message], list[list[Message]]]:
    """Split into (system messages, turns); each turn starts at a user message."""
    head: list[Message] = [m for m in messages[:1] if isinstance(m, SystemMessage)]
    turns: list[list[Message]] = []
    for message in messages[len(head) :]:
        if isinstance(message, UserMessage) or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return head, turns


def truncation_summary(dropped: Sequence[Message], limit: int = 600) -> str:
    """A short note standing in for dropped turns (the ``truncate`` strategy)."""
    snippets = []
    for message in dropped:
        if isinstance(message, UserMessage | AssistantMessage):
            text = (message.text if isinstance(message, UserMessage) else message.content) or ""
            if text.strip():
                snippets.append(f"{message.role}: {' '.join(text.split())[:120]}")
    body = "\n".join(snippets)
    if len(body) > limit:
        body = body[: limit - 1] + "…"
    return (
        f"[Summary of {len(dropped)} earlier messages, left out to fit the context window]\n{body}"
    ).strip()


def apply_window(
    messages: Sequence[Message],
    window: HistoryWindow,
    count: Counter,
    budget: int | None,
    summary: str | None = None,
) -> tuple[tuple[Message, ...], list[Message]]:
    """Return (messages to send, dropped messages).

    Keeps the system message and the last ``keep_recent_turns`` turns, then drops the oldest
    kept turns while the request exceeds ``budget`` (the current turn always stays). Dropped
    turns are replaced by one user message: ``summary`` if given, else a truncation note.
    """
    head, turns = split_turns(messages)
    keep = max(window.keep_recent_turns, 1)
    kept, dropped_turns = turns[-keep:], turns[:-keep]
    dropped = [m for turn in dropped_turns for m in turn]

    def assemble() -> list[Message]:
        note = [UserMessage(summary or truncation_summary(dropped))] if dropped else []
        return [*head, *note, *(m for turn in kept for m in turn)]

    candidate = assemble()
    while budget is not None and len(kept) > 1 and count(candidate) > budget:
        dropped.extend(kept.pop(0))
        candidate = assemble()
    return tuple(candidate), dropped
