"""The memory handle: ``self_reference.memory["<key>"]``, a validated, copy-out view of a history.

Every write is validated as a whole history (roles, content shapes, each tool call answered by
exactly one later tool result, a system message only first) before anything is stored; a failed
write changes nothing. Reads return deep copies, so no caller can alias the stored state.
Indexes follow Python: negative indexes count from the end; ``insert`` accepts any index like
``list.insert``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...exceptions import InvalidHistoryError, UnboundKeyError
from ._bank import MemoryBank

__all__ = ["MemoryHandle", "MemoryMap"]

Edit = Callable[[list[dict[str, Any]]], None]


def _message(value: Any) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidHistoryError(f"a message must be a dict, got {type(value).__name__}")
    return copy.deepcopy(dict(value))


def _index(messages: Sequence[Any], index: Any) -> int:
    if not isinstance(index, int) or isinstance(index, bool):
        raise InvalidHistoryError(f"index must be an int, got {type(index).__name__}")
    size = len(messages)
    if not -size <= index < size:
        raise InvalidHistoryError(f"index {index} out of range for {size} messages")
    return index % size


class MemoryHandle:
    """The history stored under one key. Obtain it as ``self_reference.memory["<key>"]``."""

    __slots__ = ("_key", "_owner")

    def __init__(self, owner: MemoryBank, key: str) -> None:
        self._owner = owner
        self._key = key

    @property
    def key(self) -> str:
        """The memory key."""
        return self._key

    def count(self) -> int:
        """Return the number of stored messages."""
        return len(self._owner.state(self._key).messages)

    def all(self) -> list[dict[str, Any]]:
        """Return a deep copy of every stored message."""
        return copy.deepcopy([dict(m) for m in self._owner.state(self._key).messages])

    def get(self, index: int) -> dict[str, Any]:
        """Return a deep copy of the message at ``index``.

        Raises:
            InvalidHistoryError: If ``index`` is not an int in range.
        """
        messages = self._owner.state(self._key).messages
        return copy.deepcopy(dict(messages[_index(messages, index)]))

    def append(self, message: Mapping[str, Any]) -> int:
        """Append ``message``; return the new count.

        Raises:
            InvalidHistoryError: If the history would become invalid.
        """
        return self._edit(lambda ms: ms.append(_message(message)))

    def insert(self, index: int, message: Mapping[str, Any]) -> int:
        """Insert ``message`` before ``index`` (as ``list.insert``); return the new count.

        Raises:
            InvalidHistoryError: If ``index`` is not an int or the history would become invalid.
        """
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidHistoryError(f"index must be an int, got {type(index).__name__}")
        return self._edit(lambda ms: ms.insert(index, _message(message)))

    def update(self, index: int, message: Mapping[str, Any]) -> int:
        """Replace the message at ``index``; return the count.

        Raises:
            InvalidHistoryError: If ``index`` is out of range or the history would become invalid.
        """

        def edit(ms: list[dict[str, Any]]) -> None:
            ms[_index(ms, index)] = _message(message)

        return self._edit(edit)

    def delete(self, index: int) -> int:
        """Remove the message at ``index``; return the new count.

        Raises:
            InvalidHistoryError: If ``index`` is out of range or the history would become invalid
                (e.g. deleting an assistant message whose tool results remain).
        """

        def edit(ms: list[dict[str, Any]]) -> None:
            del ms[_index(ms, index)]

        return self._edit(edit)

    def replace(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Replace the whole history with ``messages``; return the new count.

        Raises:
            InvalidHistoryError: If ``messages`` is not a valid history.
        """

        def edit(ms: list[dict[str, Any]]) -> None:
            if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Sequence):
                raise InvalidHistoryError("replace() needs a list of chat message dicts")
            ms[:] = [_message(m) for m in messages]

        return self._edit(edit)

    def clear(self) -> int:
        """Remove every message but the system prompt (as SimpleLLMFunc); return the new count
        (1 with a system prompt, else 0). ``replace([])`` removes the system prompt too."""

        def keep_system(messages: list[dict[str, Any]]) -> None:
            del messages[1 if messages and messages[0].get("role") == "system" else 0 :]

        return self._edit(keep_system)

    def get_system_prompt(self) -> str | None:
        """Return the stored system prompt, or ``None`` when there is none."""
        messages = self._owner.state(self._key).messages
        if messages and messages[0].get("role") == "system":
            return str(messages[0].get("content") or "")
        return None

    def set_system_prompt(self, text: str) -> str:
        """Overwrite the system prompt (inserted first when missing); return it.

        Raises:
            InvalidHistoryError: If ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidHistoryError("the system prompt must be a string")

        def edit(ms: list[dict[str, Any]]) -> None:
            if ms and ms[0].get("role") == "system":
                ms[0] = {**ms[0], "content": text}
            else:
                ms.insert(0, {"role": "system", "content": text})

        self._edit(edit)
        return text

    def append_system_prompt(self, text: str) -> str:
        """Append ``text`` to the system prompt on a new line; return the new prompt.

        Raises:
            InvalidHistoryError: If ``text`` is not a string.
        """
        if not isinstance(text, str):
            raise InvalidHistoryError("the system prompt must be a string")
        current = self.get_system_prompt()
        return self.set_system_prompt(text if not current else f"{current.rstrip()}\n{text}")

    def _edit(self, edit: Edit) -> int:
        return self._owner.edit_messages(self._key, edit)

    def __len__(self) -> int:
        return self.count()

    def __repr__(self) -> str:
        return f"<memory {self._key!r}: {self.count()} messages>"


class MemoryMap:
    """``self_reference.memory``: ``memory["<key>"]`` returns the key's :class:`MemoryHandle`."""

    __slots__ = ("_owner",)

    def __init__(self, owner: MemoryBank) -> None:
        self._owner = owner

    def __getitem__(self, key: str) -> MemoryHandle:
        """The handle of a bound key.

        Raises:
            InvalidHistoryError: If ``key`` is not a non-empty string.
            UnboundKeyError: If no history is bound to ``key`` (a ``KeyError``).
        """
        if not isinstance(key, str) or not key:
            raise InvalidHistoryError("a memory key must be a non-empty string")
        bound = self._owner.keys()  # a list (MemoryBank is no mapping)
        if key not in bound:
            raise UnboundKeyError(
                f"memory key {key!r} is not bound: bind a history first "
                f"(self_reference.bind_history({key!r}, [...])) or run a turn with "
                f"self_reference_key={key!r}"
            )
        return MemoryHandle(self._owner, key)

    def keys(self) -> list[str]:
        """Return every key that has stored state."""
        return self._owner.keys()

    def __repr__(self) -> str:
        return f"<SelfReference memory: {len(self.keys())} keys>"
