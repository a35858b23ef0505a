"""Validating histories of chat dicts before they are stored.

Every write of a SelfReference history is validated as a whole (roles, content shapes, each tool
call answered by exactly one later tool result, a system message only first) and stored in its
normalised form, so a failed write changes nothing and what is stored is what a provider accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from ..._messages import (
    Message,
    history_from_dicts,
    history_to_dicts,
    message_from_dict,
    message_to_dict,
    validate_history,
)
from ...exceptions import InvalidHistoryError

__all__ = ["normalise_bound", "normalise_edited", "normalise_history"]


def normalise_history(
    messages: Sequence[Any], *, deep_copy: bool = True
) -> tuple[dict[str, Any], ...]:
    """Validate ``messages`` (chat dicts) and return normalised copies.

    ``deep_copy=False`` is for lists whose dicts are already private copies: values nested in
    unknown keys are then shared with the input.

    Raises:
        InvalidHistoryError: Naming the index of the first offending message.
    """
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
        raise InvalidHistoryError("a history must be a list of chat message dicts")
    items = copy.deepcopy(list(messages)) if deep_copy else list(messages)
    parsed = history_from_dicts(items)
    return tuple(history_to_dicts(parsed))


def normalise_bound(messages: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """:func:`normalise_history` for ``bind_history``, which also takes a history caught in the
    middle of a tool call (SimpleLLMFunc binds one when a fork starts inside ``execute_code``):
    a last assistant message whose tool calls are not all answered, followed only by tool
    results, is the turn in flight; it is left out and the settled history before it is stored,
    so what is stored and what forks see is a valid history.

    Raises:
        InvalidHistoryError: If the history is invalid otherwise.
    """
    try:
        return normalise_history(messages)
    except InvalidHistoryError as error:
        if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
            raise
        items = list(messages)
        start = len(items)
        while start > 0 and _role(items[start - 1]) == "tool":
            start -= 1
        last = items[start - 1] if start > 0 else None
        if not (
            _role(last) == "assistant" and isinstance(last, Mapping) and last.get("tool_calls")
        ):
            raise
        try:
            return normalise_history(items[: start - 1])
        except InvalidHistoryError:
            raise error from None


def _role(item: Any) -> Any:
    return item.get("role") if isinstance(item, Mapping) else None


def normalise_edited(
    messages: Sequence[Any], known: Mapping[int, Message]
) -> tuple[tuple[dict[str, Any], ...], tuple[Message, ...]]:
    """Validate an edited history; only dicts not in ``known`` (by identity) are parsed.

    ``known`` maps ``id(dict)`` of stored, already normalised dicts to their typed message, so
    an edit of a long history costs one parse of the new messages plus a linear link check.

    Raises:
        InvalidHistoryError: Naming the index of the first offending message.
    """
    dicts: list[dict[str, Any]] = []
    typed: list[Message] = []
    for index, item in enumerate(messages):
        message = known.get(id(item))
        if message is None:
            if not isinstance(item, Mapping):
                raise InvalidHistoryError("messages must be dicts", index)
            try:
                message = message_from_dict(item)
            except InvalidHistoryError as exc:
                raise InvalidHistoryError(str(exc), index) from None
            item = message_to_dict(message)
        dicts.append(item)
        typed.append(message)
    validate_history(typed)
    return tuple(dicts), tuple(typed)
