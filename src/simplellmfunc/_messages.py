"""Typed chat messages and their lossless conversion to and from OpenAI-style dicts.

Histories cross the public API as lists of JSON-serialisable chat dicts; inside the library they
are tuples of the frozen dataclasses below. ``message_from_dict(message_to_dict(m)) == m`` and
``message_to_dict(message_from_dict(d)) == d`` for every valid ``d`` (unknown keys ride along in
``extra``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ._content import ContentPart, ImgPath, ImgUrl, Text, part_from_dict
from .exceptions import ContentError, InvalidHistoryError

__all__ = [
    "AssistantMessage",
    "Message",
    "SystemMessage",
    "ToolCall",
    "ToolCallFunction",
    "ToolMessage",
    "UserMessage",
    "dict_content_text",
    "history_from_dicts",
    "history_to_dicts",
    "message_from_dict",
    "message_to_dict",
    "validate_history",
]

Content: TypeAlias = str | tuple[ContentPart, ...]


@dataclass(frozen=True, slots=True)
class ToolCallFunction:
    """The function part of a tool call: its name and raw JSON ``arguments``."""

    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function call requested by the model. ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    @property
    def type(self) -> Literal["function"]:
        """Always ``"function"`` (the OpenAI ``tool_calls`` entry's ``type``)."""
        return "function"

    @property
    def function(self) -> ToolCallFunction:
        """The name and raw arguments, in the OpenAI shape (``call.function.name``)."""
        return ToolCallFunction(self.name, self.arguments)

    def to_dict(self) -> dict[str, Any]:
        """Return the OpenAI ``tool_calls`` entry."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """The system prompt."""

    content: str
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user turn: text, or a tuple of content parts (text and images)."""

    content: Content
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    role: Literal["user"] = "user"

    @property
    def text(self) -> str:
        """The text of the message, images left out."""
        return _text_of(self.content)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model turn: text, tool calls, or both; ``reasoning_details`` are passed through."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning_details: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The result of one tool call."""

    tool_call_id: str
    content: Content
    extra: Mapping[str, Any] = field(default_factory=dict, hash=False)
    role: Literal["tool"] = "tool"

    @property
    def text(self) -> str:
        """The text of the result, images left out."""
        return _text_of(self.content)


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


def _text_of(content: Content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.text for p in content if isinstance(p, Text))


def dict_content_text(content: Any) -> str:
    """The text of a message dict's ``content``: the string, or its parts' ``text`` joined
    (image parts left out); ``""`` for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = (p.get("text") for p in content if isinstance(p, Mapping))
        return "".join(p for p in parts if isinstance(p, str))
    return ""


def _content_to_json(content: Content) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [p.to_part() for p in content]


def _content_from_json(value: Any, what: str) -> Content:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts: list[ContentPart] = []
        for part in value:
            if not isinstance(part, dict):
                raise ContentError(f"{what} content parts must be objects")
            parts.append(part_from_dict(part))
        return tuple(parts)
    raise ContentError(f"{what} content must be a string or a list of parts")


def message_to_dict(message: Message) -> dict[str, Any]:
    """Convert a typed message to an OpenAI-style chat dict (a fresh, JSON-serialisable dict)."""
    out: dict[str, Any] = {"role": message.role}
    if isinstance(message, SystemMessage):
        out["content"] = message.content
    elif isinstance(message, UserMessage):
        out["content"] = _content_to_json(message.content)
    elif isinstance(message, AssistantMessage):
        out["content"] = message.content
        if message.tool_calls:
            out["tool_calls"] = [c.to_dict() for c in message.tool_calls]
        if message.reasoning_details:
            out["reasoning_details"] = [dict(r) for r in message.reasoning_details]
    else:
        out["tool_call_id"] = message.tool_call_id
        out["content"] = _content_to_json(message.content)
    out.update(message.extra)
    return out


def _tool_call_from_dict(raw: Any) -> ToolCall:
    if not isinstance(raw, dict) or not isinstance(raw.get("function"), dict):
        raise ContentError("tool_calls entries need a 'function' object")
    fn = raw["function"]
    if not isinstance(raw.get("id"), str) or not isinstance(fn.get("name"), str):
        raise ContentError("tool call needs a string 'id' and 'function.name'")
    arguments = fn.get("arguments", "{}")
    if not isinstance(arguments, str):
        raise ContentError("tool call 'function.arguments' must be a JSON string")
    return ToolCall(raw["id"], fn["name"], arguments)


_KNOWN = {
    "system": {"role", "content"},
    "user": {"role", "content"},
    "assistant": {"role", "content", "tool_calls", "reasoning_details"},
    "tool": {"role", "content", "tool_call_id"},
}


def message_from_dict(data: Mapping[str, Any]) -> Message:
    """Parse one OpenAI-style chat dict.

    Raises:
        InvalidHistoryError: For an unknown role or malformed fields.
    """
    role = data.get("role")
    if role not in _KNOWN:
        raise InvalidHistoryError(f"unknown role {role!r}")
    rest = {k: v for k, v in data.items() if k not in _KNOWN[role]}
    # No extras (the common case): a plain empty dict, as a message built directly has, which
    # pickles (durable runs record messages) and costs one object, not two.
    extra: Mapping[str, Any] = MappingProxyType(rest) if rest else rest
    try:
        content = data.get("content")
        if role == "system":
            return SystemMessage(_text_of(_content_from_json(content, "system")), extra)
        if role == "user":
            return UserMessage(_content_from_json(content, "user"), extra)
        if role == "tool":
            call_id = data.get("tool_call_id")
            if not isinstance(call_id, str):
                raise InvalidHistoryError("tool message needs a string 'tool_call_id'")
            return ToolMessage(call_id, _content_from_json(content or "", "tool"), extra)
        if content is not None and not isinstance(content, str):
            content = _text_of(_content_from_json(content, "assistant"))
        calls = tuple(_tool_call_from_dict(c) for c in data.get("tool_calls") or ())
        reasoning = tuple(MappingProxyType(dict(r)) for r in data.get("reasoning_details") or ())
        return AssistantMessage(content, calls, reasoning, extra)
    except ContentError as exc:
        raise InvalidHistoryError(str(exc)) from exc


def validate_history(messages: Sequence[Message], *, allow_pending_calls: bool = False) -> None:
    """Check that a history is acceptable to providers.

    Every tool result must answer a tool call of an earlier assistant message, once; unless
    ``allow_pending_calls``, every tool call must have its result.

    Raises:
        InvalidHistoryError: Naming the index of the first offending message.
    """
    pending: dict[str, int] = {}
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage) and index != 0:
            raise InvalidHistoryError("a system message is only allowed first", index)
        if isinstance(message, ToolMessage):
            if message.tool_call_id in answered:
                raise InvalidHistoryError(
                    f"tool call {message.tool_call_id!r} already has a result", index
                )
            if message.tool_call_id not in pending:
                raise InvalidHistoryError(
                    f"tool result for unknown call {message.tool_call_id!r} (a tool message "
                    "without preceding assistant tool_calls of that id)",
                    index,
                )
            del pending[message.tool_call_id]
            answered.add(message.tool_call_id)
            continue
        if pending and not allow_pending_calls:
            call_id, at = next(iter(pending.items()))
            raise InvalidHistoryError(f"tool call {call_id!r} has no result", at)
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                pending[call.id] = index
    if pending and not allow_pending_calls:
        call_id, at = next(iter(pending.items()))
        raise InvalidHistoryError(f"tool call {call_id!r} has no result", at)


def history_from_dicts(history: Iterable[Mapping[str, Any]] | None) -> tuple[Message, ...]:
    """Parse and validate a history of chat dicts.

    Raises:
        InvalidHistoryError: Naming the index of the first offending message.
    """
    messages: list[Message] = []
    for index, item in enumerate(history or ()):
        if not isinstance(item, Mapping):
            raise InvalidHistoryError("messages must be dicts", index)
        try:
            messages.append(message_from_dict(item))
        except InvalidHistoryError as exc:
            raise InvalidHistoryError(str(exc), index) from None
    validate_history(messages)
    return tuple(messages)


def history_to_dicts(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert typed messages to a fresh list of chat dicts."""
    return [message_to_dict(m) for m in messages]


def user_message(parts: Iterable[ContentPart | str]) -> UserMessage:
    """Build a user message, collapsing a text-only list to a plain string."""
    items = tuple(Text(p) if isinstance(p, str) else p for p in parts)
    if all(isinstance(p, Text) for p in items):
        return UserMessage("".join(p.text for p in items if isinstance(p, Text)))
    resolved = tuple(p.to_img_url() if isinstance(p, ImgPath) else p for p in items)
    return UserMessage(tuple(p for p in resolved if isinstance(p, Text | ImgUrl)))
