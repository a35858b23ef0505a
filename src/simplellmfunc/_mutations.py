"""ContextMutation: the typed patch protocol for every runtime edit of a run's transcript.

The engine never edits the working transcript in place. Each runtime side effect (an LLM reply,
a tool result, a SelfReference primitive, an abort) is described by one of the ten frozen
dataclasses below and applied by :class:`~simplellmfunc._transcript.Transcript`. Mutations do not
define the whole LLM request: invocation config (docstring prompt, template parameters, tool
guidance, output contract) and the base history are separate compilation inputs.

Within one ReAct iteration mutations are applied in :data:`PHASE_ORDER`: hook mutations first
(collected from SelfReference sessions and custom hooks), then the LLM's assistant message, then
the tool batch's results and experience edits, then abort records if the run was interrupted.

List-valued fields are stored as tuples: every mutation is frozen, so a shared mutable default
would be a trap. Constructors accept any sequence (``tool_calls=[...]`` works as in the seed)
and normalise it to a tuple, so a mutation built from a list equals one built from a tuple. The
dicts inside are chat-message fragments in the OpenAI shape; the ``to_message`` methods parse and
validate them (raising :class:`~simplellmfunc.exceptions.InvalidHistoryError`) into the typed
messages a :class:`~simplellmfunc._transcript.Transcript` appends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from ._messages import (
    AssistantMessage,
    Message,
    ToolMessage,
    UserMessage,
    history_from_dicts,
    message_from_dict,
)
from .exceptions import InvalidHistoryError

__all__ = [
    "PHASE_ORDER",
    "AssistantMessageMutation",
    "AssistantTruncatedMutation",
    "ContextMutation",
    "ContextReplaceMutation",
    "ContextSummaryMutation",
    "ExperienceForgetMutation",
    "ExperienceRememberMutation",
    "MultimodalToolResultMutation",
    "MutationPhase",
    "ToolCancelledMutation",
    "ToolResultMutation",
    "UserMessageMutation",
    "phase_of",
]

MutationPhase: TypeAlias = Literal["hook", "llm", "tool", "abort"]

PHASE_ORDER: tuple[MutationPhase, ...] = ("hook", "llm", "tool", "abort")
"""The order in which the engine applies the mutations of one iteration, by phase."""


def _freeze(obj: object, name: str) -> None:
    """Store the sequence field ``name`` of a frozen dataclass as a tuple."""
    value = getattr(obj, name)
    if not isinstance(value, tuple) and isinstance(value, Sequence):
        object.__setattr__(obj, name, tuple(value))


def _str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise InvalidHistoryError(f"{what} must be a string, got {type(value).__name__}")
    return value


def _plain(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidHistoryError(f"{what} entries must be dicts, got {type(value).__name__}")
    return dict(value)


def _parse(data: object, roles: tuple[str, ...], what: str) -> Message:
    """Parse a chat dict whose role (``roles[0]`` when missing) must be one of ``roles``."""
    if not isinstance(data, Mapping):
        raise InvalidHistoryError(f"{what} must be a chat dict, got {type(data).__name__}")
    role = data.get("role", roles[0])
    if role not in roles:
        raise InvalidHistoryError(f"{what} must have role {' or '.join(roles)}, not {role!r}")
    return message_from_dict({**data, "role": role})


def _user(data: object, what: str) -> UserMessage:
    message = _parse(data, ("user",), what)
    assert isinstance(message, UserMessage)  # role "user" always parses to one
    return message


# -- standard flow ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssistantMessageMutation:
    """The model replied (text, tool calls or both): append an assistant message.

    Produced after every successful LLM call. ``tool_calls`` are OpenAI ``tool_calls`` entries
    (``{"id", "type": "function", "function": {"name", "arguments"}}``); ``reasoning_details``
    are passed through untouched.
    """

    role: Literal["assistant"] = "assistant"
    content: str | None = None
    tool_calls: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    reasoning_details: Sequence[Mapping[str, Any]] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _freeze(self, "tool_calls")
        _freeze(self, "reasoning_details")

    def to_message(self) -> AssistantMessage:
        """Return the typed assistant message.

        Raises:
            InvalidHistoryError: For a wrong role or malformed content, tool calls or reasoning.
        """
        if self.role != "assistant":
            raise InvalidHistoryError(
                f"AssistantMessageMutation.role must be 'assistant': {self.role!r}"
            )
        if self.content is not None:
            _str(self.content, "AssistantMessageMutation.content")
        data = {
            "role": "assistant",
            "content": self.content,
            "tool_calls": [_plain(c, "tool_calls") for c in self.tool_calls],
            "reasoning_details": [_plain(r, "reasoning_details") for r in self.reasoning_details],
        }
        message = message_from_dict(data)
        assert isinstance(message, AssistantMessage)  # role "assistant" always parses to one
        ids = [c.id for c in message.tool_calls]
        if len(set(ids)) != len(ids):
            raise InvalidHistoryError("an assistant message repeats a tool call id")
        return message


@dataclass(frozen=True, slots=True)
class ToolResultMutation:
    """A tool finished with a text result: append the tool message answering ``tool_call_id``."""

    tool_call_id: str
    content: str
    role: Literal["tool"] = "tool"

    def to_message(self) -> ToolMessage:
        """Return the typed tool message.

        Raises:
            InvalidHistoryError: For a non-string id or content, or a wrong role.
        """
        if self.role != "tool":
            raise InvalidHistoryError(f"ToolResultMutation.role must be 'tool': {self.role!r}")
        call_id = _str(self.tool_call_id, "ToolResultMutation.tool_call_id")
        return ToolMessage(call_id, _str(self.content, "ToolResultMutation.content"))


@dataclass(frozen=True, slots=True)
class MultimodalToolResultMutation:
    """A tool returned images or mixed content that a plain tool message cannot carry.

    Most providers accept images only in user messages, so the result is restructured: the call
    gets a short text tool result pointing at the user message(s) in ``user_messages`` (chat dicts
    with image parts), which follow the tool results of the batch.
    """

    tool_call_id: str
    tool_name: str
    arguments: str
    user_messages: Sequence[Mapping[str, Any]]

    def __post_init__(self) -> None:
        _freeze(self, "user_messages")

    def to_messages(self) -> tuple[ToolMessage, tuple[UserMessage, ...]]:
        """Return the text tool result answering the call and the user messages that follow.

        Raises:
            InvalidHistoryError: For malformed fields, a non-user message or no user message.
        """
        call_id = _str(self.tool_call_id, "MultimodalToolResultMutation.tool_call_id")
        name = _str(self.tool_name, "MultimodalToolResultMutation.tool_name")
        _str(self.arguments, "MultimodalToolResultMutation.arguments")
        what = "MultimodalToolResultMutation.user_messages"
        users = tuple(_user(d, what) for d in self.user_messages)
        if not users:
            raise InvalidHistoryError(f"{what} must hold at least one user message")
        text = (
            f"Tool `{name}` returned multimodal content (images); "
            "it is attached in the next user message."
        )
        return ToolMessage(call_id, text), users


@dataclass(frozen=True, slots=True)
class UserMessageMutation:
    """Inject a user message mid-run (input routers, custom hooks)."""

    message: Mapping[str, Any]

    def to_message(self) -> UserMessage:
        """Return the typed user message (a missing ``role`` means ``"user"``).

        Raises:
            InvalidHistoryError: For a malformed dict or another role.
        """
        return _user(self.message, "UserMessageMutation.message")


# -- transcript reset ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContextReplaceMutation:
    """Hard reset: discard the working transcript and use ``messages`` (chat dicts) instead."""

    messages: Sequence[Mapping[str, Any]]

    def __post_init__(self) -> None:
        _freeze(self, "messages")

    def to_messages(self) -> tuple[Message, ...]:
        """Return the replacement history, parsed and validated (every call answered).

        Raises:
            InvalidHistoryError: Naming the index of the first offending message.
        """
        return history_from_dicts(self.messages)


@dataclass(frozen=True, slots=True)
class ContextSummaryMutation:
    """Compaction: keep the system prompt, replace the rest with ``summary_message``.

    Each entry of ``remember`` (``{"text": ...}``) is stored as a durable experience.
    """

    summary_message: Mapping[str, Any]
    remember: Sequence[Mapping[str, str]] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        _freeze(self, "remember")

    def to_message(self) -> Message:
        """Return the typed summary message: a user or assistant message without tool calls.

        Raises:
            InvalidHistoryError: For a malformed dict, another role or tool calls.
        """
        message = _parse(self.summary_message, ("assistant", "user"), "summary_message")
        if isinstance(message, AssistantMessage) and message.tool_calls:
            raise InvalidHistoryError("summary_message must not contain tool calls")
        return message

    def remember_texts(self) -> tuple[str, ...]:
        """Return the texts of ``remember``.

        Raises:
            InvalidHistoryError: If an entry is not a dict with a string ``"text"``.
        """
        what = "ContextSummaryMutation.remember"
        return tuple(_str(_plain(e, what).get("text"), f"{what}[].text") for e in self.remember)


# -- experiences -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExperienceRememberMutation:
    """Store ``text`` as a new durable experience (rendered into the system context)."""

    text: str


@dataclass(frozen=True, slots=True)
class ExperienceForgetMutation:
    """Remove the stored experience with id ``experience_id``."""

    experience_id: str


# -- abort -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AssistantTruncatedMutation:
    """An abort cut an assistant reply short: append what was received, marked truncated."""

    partial_content: str
    abort_reason: str = ""

    def to_message(self) -> AssistantMessage:
        """Return the assistant message, marked ``extra={"truncated": True, "abort_reason": ...}``.

        Raises:
            InvalidHistoryError: For non-string fields.
        """
        content = _str(self.partial_content, "AssistantTruncatedMutation.partial_content")
        reason = _str(self.abort_reason, "AssistantTruncatedMutation.abort_reason")
        extra = MappingProxyType({"truncated": True, "abort_reason": reason})
        return AssistantMessage(content, extra=extra)


@dataclass(frozen=True, slots=True)
class ToolCancelledMutation:
    """An abort stopped a tool call: append a tool result saying so, keeping the history valid."""

    tool_call_id: str
    tool_name: str
    abort_reason: str = ""

    def to_message(self) -> ToolMessage:
        """Return the tool result saying the call was cancelled and why.

        The message carries ``extra={"cancelled": True, "abort_reason": ...}``.

        Raises:
            InvalidHistoryError: For non-string fields.
        """
        call_id = _str(self.tool_call_id, "ToolCancelledMutation.tool_call_id")
        name = _str(self.tool_name, "ToolCancelledMutation.tool_name")
        reason = _str(self.abort_reason, "ToolCancelledMutation.abort_reason")
        text = f"Tool `{name}` was cancelled before it finished" + (
            f": {reason}" if reason else "."
        )
        extra = MappingProxyType({"cancelled": True, "abort_reason": reason})
        return ToolMessage(call_id, text, extra)


ContextMutation: TypeAlias = (
    AssistantMessageMutation
    | ToolResultMutation
    | MultimodalToolResultMutation
    | UserMessageMutation
    | ContextReplaceMutation
    | ContextSummaryMutation
    | ExperienceRememberMutation
    | ExperienceForgetMutation
    | AssistantTruncatedMutation
    | ToolCancelledMutation
)

_PHASES: dict[type[Any], MutationPhase] = {
    UserMessageMutation: "hook",
    ContextReplaceMutation: "hook",
    ContextSummaryMutation: "hook",
    AssistantMessageMutation: "llm",
    ToolResultMutation: "tool",
    MultimodalToolResultMutation: "tool",
    ExperienceRememberMutation: "tool",
    ExperienceForgetMutation: "tool",
    AssistantTruncatedMutation: "abort",
    ToolCancelledMutation: "abort",
}


def phase_of(mutation: ContextMutation) -> MutationPhase:
    """Return the phase in which the engine applies ``mutation`` by default.

    ``UserMessage``, ``ContextReplace`` and ``ContextSummary`` are hook mutations (SelfReference
    compaction and forks are collected by the session hook before the next LLM call);
    ``AssistantMessage`` is the LLM phase; tool results and experience edits are the tool phase;
    ``AssistantTruncated`` and ``ToolCancelled`` are the abort phase.

    Raises:
        InvalidHistoryError: If ``mutation`` is not a ContextMutation.
    """
    try:
        return _PHASES[type(mutation)]
    except KeyError:
        raise InvalidHistoryError(f"not a ContextMutation: {type(mutation).__name__}") from None
