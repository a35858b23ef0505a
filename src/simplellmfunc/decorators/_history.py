"""What an ``@llm_chat`` call yields: one run item as SimpleLLMFunc's shapes, over a history
view of the live transcript."""

from __future__ import annotations

from typing import Any

from .._events import ResponseYield
from .._messages import Message, SystemMessage, history_from_dicts, history_to_dicts
from .._transcript import Transcript
from ..engine import RawItem, RunResult, TextChunk
from ..exceptions import DecoratorError

__all__ = ["HistoryView", "chat_output", "initial_messages"]


def chat_output(item: Any, view: HistoryView, *, enable_event: bool, stream: bool) -> Any:
    """What the decorated function yields for one item of the run (a text delta first: the
    item a streamed reply yields most)."""
    kind = type(item)
    if kind is TextChunk:
        return (item.text, view.dicts())
    if kind is RunResult:
        final = history_to_dicts(item.messages)
        if enable_event:
            return ResponseYield(item.text, final)
        return (item.text if not stream else "", final)
    if kind is RawItem:
        return (item.item, view.dicts())
    return item


def initial_messages(system: str, history: object, user: Message | None) -> list[Message]:
    if history is not None and not isinstance(history, list | tuple):
        raise DecoratorError("history must be a list of chat message dicts")
    previous = history_from_dicts(history)
    rest = [m for m in previous if not isinstance(m, SystemMessage)]
    if system:
        head: list[Message] = [SystemMessage(system)]
    else:  # no docstring: the history's own system prompt, if any, stays
        head = [m for m in previous[:1] if isinstance(m, SystemMessage)]
    return [*head, *rest] if user is None else [*head, *rest, user]


class HistoryView:
    """Chat dicts of the live transcript, rebuilt only when the transcript changed."""

    __slots__ = ("_cache", "_key", "_transcript")

    def __init__(self, transcript: Transcript) -> None:
        self._transcript = transcript
        self._key: object = None
        self._cache: list[dict[str, Any]] = []

    def dicts(self) -> list[dict[str, Any]]:
        messages = self._transcript.messages
        if messages is not self._key:
            self._key = messages
            self._cache = history_to_dicts(messages)
        return list(self._cache)
