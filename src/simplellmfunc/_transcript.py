"""Transcript: the one object that edits a run's working transcript, by applying ContextMutations.

A transcript holds typed messages and durable experiences. Its invariant: the messages are a
history providers accept (:func:`~simplellmfunc._messages.validate_history`), except that the tool
calls of the *last* assistant message may still wait for results while its tool batch runs. Every
:meth:`Transcript.apply` either keeps that invariant or raises
:class:`~simplellmfunc.exceptions.InvalidHistoryError` and leaves the transcript unchanged.

Representation choices (documented contract):

* **Multimodal tool results.** Providers accept images only in user messages and reject a user
  message between the tool results of one assistant turn. So the assistant's tool call is kept and
  answered by a text tool message (``"Tool `name` returned multimodal content (images); it is
  attached in the next user message."``); the mutation's user messages are held back and appended
  right after the last result of the batch. While the batch is still open they already show at the
  end of :attr:`Transcript.messages` (a read never reorders anything).
* **Truncated replies** are assistant messages with ``extra={"truncated": True, "abort_reason":
  ...}``; **cancelled tools** are tool messages with ``extra={"cancelled": True, "abort_reason":
  ...}``. ``extra`` keys survive dict round trips; provider adapters should not forward them.
* **Experiences** are batched: Remember/Forget mutations queue up and are committed right before
  the next non-experience mutation is applied, on :meth:`Transcript.flush` and when
  :attr:`Transcript.experiences` is read. A remembered experience gets its id when queued:
  ``exp_<n>`` with ``n`` one more than the largest numeric suffix ever held, so ids never collide,
  also after rebinding persisted experiences. Forgetting an unknown id is a no-op and
  :meth:`Transcript.apply` returns ``False``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from ._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    history_to_dicts,
    message_from_dict,
    validate_history,
)
from ._mutations import (
    AssistantMessageMutation,
    AssistantTruncatedMutation,
    ContextMutation,
    ContextReplaceMutation,
    ContextSummaryMutation,
    ExperienceForgetMutation,
    ExperienceRememberMutation,
    MultimodalToolResultMutation,
    ToolCancelledMutation,
    ToolResultMutation,
    UserMessageMutation,
)
from .exceptions import InvalidHistoryError

__all__ = ["Experience", "Transcript", "TranscriptSnapshot", "render_experiences"]

_EXP_ID = re.compile(r"exp_(\d+)")


@dataclass(frozen=True, slots=True)
class Experience:
    """A durable fact the agent chose to remember, rendered into its system context."""

    id: str
    text: str

    def to_dict(self) -> dict[str, str]:
        """Return ``{"id": ..., "text": ...}`` for persistence."""
        return {"id": self.id, "text": self.text}


def render_experiences(experiences: Iterable[Experience]) -> str:
    """Render experiences as the block that goes into the system context.

    The format is stable: a ``## Experiences`` heading, then one ``- [<id>] <text>`` line per
    experience in the order given; continuation lines of a multi-line text are indented by two
    spaces. No experiences render as the empty string. Example::

        ## Experiences
        - [exp_1] The user prefers metric units.
        - [exp_2] Tests live in tests/.
    """
    lines = [f"- [{e.id}] " + e.text.replace("\n", "\n  ") for e in experiences]
    return "## Experiences\n" + "\n".join(lines) if lines else ""


@dataclass(frozen=True, slots=True)
class TranscriptSnapshot:
    """An immutable copy of a transcript's messages and experiences."""

    messages: tuple[Message, ...]
    experiences: tuple[Experience, ...]

    def to_dicts(self) -> list[dict[str, Any]]:
        """Return the messages as a fresh list of chat dicts."""
        return history_to_dicts(self.messages)


@dataclass(frozen=True, slots=True)
class _Edit:
    """What a validated mutation does; computed before anything changes."""

    append: tuple[Message, ...] = ()
    defer: tuple[UserMessage, ...] = ()
    replace: tuple[Message, ...] | None = None
    remember: tuple[str, ...] = ()


class Transcript:
    """A run's working transcript, edited only through :meth:`apply`.

    Appends are amortised O(1): messages live in a list and the tuple views are built lazily and
    cached until the next change.

    Args:
        messages: The starting history. The last assistant message's tool calls may lack results.
        experiences: Stored experiences, as :class:`Experience` or ``{"id", "text"}`` dicts.

    Raises:
        InvalidHistoryError: If ``messages`` is not a valid history or experience ids repeat.
    """

    __slots__ = (
        "_batch",
        "_deferred",
        "_exp_view",
        "_exps",
        "_live",
        "_msgs",
        "_next_n",
        "_pending",
        "_seen",
        "_view",
    )

    def __init__(
        self,
        messages: Sequence[Message] = (),
        experiences: Iterable[Experience | Mapping[str, Any]] = (),
    ) -> None:
        self._msgs: list[Message] = []
        self._deferred: list[UserMessage] = []
        self._pending: dict[str, ToolCall] = {}
        self._seen: set[str] = set()
        self._view: tuple[Message, ...] | None = None
        self._exps: dict[str, Experience] = {}
        self._exp_view: tuple[Experience, ...] | None = None
        self._batch: list[Experience | str] = []
        self._live: set[str] = set()
        self._next_n = 1
        self._reset_messages(tuple(messages))
        for item in experiences:
            exp = _experience(item)
            if exp.id in self._exps:
                raise InvalidHistoryError(f"duplicate experience id {exp.id!r}")
            self._store(exp)

    @classmethod
    def from_dicts(
        cls,
        history: Iterable[Mapping[str, Any]] | None,
        experiences: Iterable[Experience | Mapping[str, Any]] = (),
    ) -> Transcript:
        """Build a transcript from chat dicts (the API-boundary shape of a history).

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
        return cls(messages, experiences)

    # -- reading ---------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Message, ...]:
        """The messages, including multimodal user messages held back until the batch ends."""
        if self._view is None:
            self._view = (*self._msgs, *self._deferred)
        return self._view

    @property
    def experiences(self) -> tuple[Experience, ...]:
        """The stored experiences, oldest first (commits queued Remember/Forget edits)."""
        self.flush()
        if self._exp_view is None:
            self._exp_view = tuple(self._exps.values())
        return self._exp_view

    @property
    def pending_tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls of the last assistant message that have no result yet."""
        return tuple(self._pending.values())

    @property
    def next_experience_id(self) -> str:
        """The id the next remembered experience will get."""
        return f"exp_{self._next_n}"

    def to_dicts(self) -> list[dict[str, Any]]:
        """Return :attr:`messages` as a fresh list of chat dicts."""
        return history_to_dicts(self.messages)

    def snapshot(self) -> TranscriptSnapshot:
        """Return an immutable copy (shares the cached tuples; commits queued experience edits)."""
        return TranscriptSnapshot(self.messages, self.experiences)

    def flush(self) -> None:
        """Commit queued experience edits.

        Held-back multimodal user messages need no flush: they are committed as soon as the last
        call of their batch is answered, and committing them earlier would put a user message
        between tool results.
        """
        if not self._batch:
            return
        for item in self._batch:
            if isinstance(item, Experience):
                self._exps[item.id] = item
            else:
                del self._exps[item]
        self._batch.clear()
        self._exp_view = None

    def __repr__(self) -> str:
        return (
            f"Transcript(messages={len(self._msgs) + len(self._deferred)}, "
            f"experiences={len(self._live)}, pending_calls={len(self._pending)})"
        )

    # -- applying --------------------------------------------------------------------------

    def apply(self, mutation: ContextMutation) -> bool:
        """Apply one mutation.

        Returns:
            ``False`` only for an ``ExperienceForgetMutation`` of an unknown id (nothing changes);
            ``True`` otherwise.

        Raises:
            InvalidHistoryError: If the mutation is malformed or would make the transcript invalid
                (a result for an unknown or answered call, a message while calls are pending, ...);
                the transcript is left unchanged.
        """
        if type(mutation) is ToolResultMutation:  # the engine's most frequent edit
            self._commit(self._plan(mutation))
            return True
        if isinstance(mutation, ExperienceRememberMutation):
            if not isinstance(mutation.text, str):
                raise InvalidHistoryError("ExperienceRememberMutation.text must be a string")
            exp = Experience(self.next_experience_id, mutation.text)
            self._next_n += 1
            self._batch.append(exp)
            self._live.add(exp.id)
            return True
        if isinstance(mutation, ExperienceForgetMutation):
            if mutation.experience_id not in self._live:
                return False
            self._batch.append(mutation.experience_id)
            self._live.discard(mutation.experience_id)
            return True
        self._commit(self._plan(mutation))
        return True

    def append_reply(self, message: AssistantMessage) -> None:
        """Append the model's reply: what applying an :class:`AssistantMessageMutation` of its
        content, tool calls and reasoning does, without building that mutation and parsing
        it back from chat dicts (the engine's path, once per LLM call; nothing reads the
        mutation). ``message.extra`` is not kept, as the mutation carries none.

        Raises:
            InvalidHistoryError: As :meth:`apply` for that mutation (calls still pending, a
                repeated or already used call id); the transcript is left unchanged.
        """
        self._check_no_pending("AssistantMessageMutation")
        calls = message.tool_calls
        if calls:
            ids = {c.id for c in calls}
            if len(ids) != len(calls):
                raise InvalidHistoryError("an assistant message repeats a tool call id")
            for call in calls:
                if call.id in self._seen:
                    raise InvalidHistoryError(f"tool call id {call.id!r} is already used")
        if message.extra or any(type(r) is not MappingProxyType for r in message.reasoning_details):
            message = AssistantMessage(
                message.content,
                calls,
                tuple(MappingProxyType(dict(r)) for r in message.reasoning_details),
            )
        self._commit(_Edit(append=(message,)))

    def apply_all(self, mutations: Iterable[ContextMutation]) -> tuple[bool, ...]:
        """Apply mutations in order; stops at the first invalid one (earlier ones stay applied).

        Raises:
            InvalidHistoryError: As :meth:`apply`.
        """
        return tuple(self.apply(m) for m in mutations)

    def _plan(self, m: ContextMutation) -> _Edit:
        if isinstance(m, ToolResultMutation | ToolCancelledMutation):
            message = m.to_message()
            self._check_answer(message.tool_call_id)
            return _Edit(append=(message,))
        if isinstance(m, MultimodalToolResultMutation):
            result, users = m.to_messages()
            self._check_answer(result.tool_call_id)
            return _Edit(append=(result,), defer=users)
        if isinstance(m, ContextReplaceMutation):
            return _Edit(replace=m.to_messages())
        if isinstance(m, ContextSummaryMutation):
            summary, texts = m.to_message(), m.remember_texts()
            first = self._msgs[:1]
            keep = first if first and isinstance(first[0], SystemMessage) else []
            return _Edit(replace=(*keep, summary), remember=texts)
        if isinstance(m, AssistantTruncatedMutation | UserMessageMutation):
            self._check_no_pending(type(m).__name__)
            return _Edit(append=(m.to_message(),))
        if isinstance(m, AssistantMessageMutation):
            self._check_no_pending(type(m).__name__)
            assistant = m.to_message()
            for call in assistant.tool_calls:
                if call.id in self._seen:
                    raise InvalidHistoryError(f"tool call id {call.id!r} is already used")
            return _Edit(append=(assistant,))
        raise InvalidHistoryError(f"not a ContextMutation: {type(m).__name__}")

    def _check_answer(self, call_id: str) -> None:
        if call_id in self._pending:
            return
        if call_id in self._seen:
            raise InvalidHistoryError(f"tool call {call_id!r} already has a result")
        raise InvalidHistoryError(f"tool result for unknown call {call_id!r}")

    def _check_no_pending(self, what: str) -> None:
        if self._pending:
            call_id = next(iter(self._pending))
            raise InvalidHistoryError(f"cannot apply {what}: tool call {call_id!r} has no result")

    # -- committing (never raises) ---------------------------------------------------------

    def _commit(self, edit: _Edit) -> None:
        self.flush()
        if edit.replace is not None:
            self._reset_messages(edit.replace)
        for message in edit.append:
            self._msgs.append(message)
            if isinstance(message, ToolMessage):
                del self._pending[message.tool_call_id]
            elif isinstance(message, AssistantMessage) and message.tool_calls:
                self._pending = {c.id: c for c in message.tool_calls}
                self._seen.update(self._pending)
        self._deferred.extend(edit.defer)
        if self._deferred and not self._pending:
            self._msgs.extend(self._deferred)
            self._deferred.clear()
        for text in edit.remember:
            self._store(Experience(self.next_experience_id, text))
        self._view = None

    def _reset_messages(self, messages: Sequence[Message]) -> None:
        self._msgs = list(messages)
        self._deferred.clear()
        self._pending, self._seen = _open_calls(self._msgs)
        self._view = None

    def _store(self, exp: Experience) -> None:
        self._exps[exp.id] = exp
        self._live.add(exp.id)
        self._exp_view = None
        match = _EXP_ID.fullmatch(exp.id)
        if match:
            self._next_n = max(self._next_n, int(match.group(1)) + 1)


def _open_calls(history: Sequence[Message]) -> tuple[dict[str, ToolCall], set[str]]:
    """Return the unanswered calls of ``history`` and every call id it holds.

    Raises:
        InvalidHistoryError: If ``history`` is invalid or a call other than one of the last
            assistant turn's lacks a result.
    """
    validate_history(history, allow_pending_calls=True)
    pending: dict[str, ToolCall] = {}
    seen: set[str] = set()
    for index, message in enumerate(history):
        if isinstance(message, ToolMessage):
            pending.pop(message.tool_call_id, None)
            continue
        if pending:
            raise InvalidHistoryError(f"tool call {next(iter(pending))!r} has no result", index)
        if isinstance(message, AssistantMessage):
            pending = {c.id: c for c in message.tool_calls}
            seen.update(pending)
    return pending, seen


def _experience(item: Experience | Mapping[str, Any]) -> Experience:
    if isinstance(item, Experience):
        return item
    if not isinstance(item, Mapping):
        raise InvalidHistoryError("experiences must be Experience objects or dicts")
    exp_id, text = item.get("id"), item.get("text")
    if not isinstance(exp_id, str) or not isinstance(text, str):
        raise InvalidHistoryError("experience dicts need string 'id' and 'text'")
    return Experience(exp_id, text)
