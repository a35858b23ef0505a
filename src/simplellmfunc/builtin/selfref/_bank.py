"""The memory bank: the per-key state of a SelfReference, cached over its store, and the edits
that running turns have not seen yet.

Everything below :class:`~._reference.SelfReference` depends on this object, never on the class
on top: the memory handles (``_handle``), the run hook (``_hook``), the running turn and its forks
(``_turn``, ``_forks``) and the kernel primitives (``_primitives``). ``SelfReference`` is a
``MemoryBank`` plus what binds it to agents and kernels.

State lives in a :class:`~._store.StateStore` (in memory, or SQLite) and is cached here, so one
process should own a database file at a time. Every change is one store transaction. Changes made
while an ``@llm_chat`` turn bound to the key is running (by tools through the PyRepl bridge, or by
host code) are also recorded as :class:`PendingEdits` that the turn's run hook turns into
ContextMutations at its next hook point (see ``_hook``).

Experience ids are ``exp_<n>`` with ``n`` taken from a per-key counter that only grows, so ids
never collide, also after forgetting or re-binding.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, cast

from ..._messages import Message, message_from_dict
from ..._mutations import (
    ContextMutation,
    ContextSummaryMutation,
    ExperienceForgetMutation,
    ExperienceRememberMutation,
)
from ...exceptions import InvalidHistoryError, UserError
from ._history import normalise_bound, normalise_edited
from ._store import KeyState, StateStore
from ._summary import summary_text

__all__ = ["MemoryBank", "PendingEdits", "check_fork_limits"]


def check_fork_limits(max_fork_depth: int, max_concurrent_forks: int) -> None:
    """Raise ``UserError`` for a negative depth or a concurrency below 1."""
    if max_fork_depth < 0 or max_concurrent_forks < 1:
        raise UserError("max_fork_depth must be >= 0 and max_concurrent_forks >= 1")


@dataclass(slots=True)
class PendingEdits:
    """Memory changes made during a running turn, not yet in its transcript.

    Attributes:
        mutations: Experience and summary mutations, in the order they happened.
        dirty: The stored messages were edited (a ContextReplace is due).
        compacted: A compaction replaced the working transcript (drop the turn's tail).
    """

    mutations: list[ContextMutation] = field(default_factory=list)
    dirty: bool = False
    compacted: bool = False


class MemoryBank:
    """Histories, experiences, summary checkpoints and fork handles per memory key.

    Args:
        store: Where the state is kept.
        max_fork_depth: How deep forks may nest (a root agent is depth 0, its forks depth 1);
            a spawn beyond it is refused.
        max_concurrent_forks: Forks of one turn that run at once; further spawns are queued.

    Raises:
        UserError: For a negative depth or a concurrency below 1.
    """

    def __init__(
        self, store: StateStore, *, max_fork_depth: int = 2, max_concurrent_forks: int = 4
    ) -> None:
        check_fork_limits(max_fork_depth, max_concurrent_forks)
        self.max_fork_depth = max_fork_depth
        self.max_concurrent_forks = max_concurrent_forks
        self._store = store
        self._cache: dict[str, KeyState] = {}
        # Typed messages of the cached states, so edits need not re-parse whole histories.
        self._typed: dict[str, tuple[Message, ...]] = {}
        self._lock = threading.RLock()
        self._pending: dict[str, PendingEdits] = {}

    # -- reading and binding -----------------------------------------------------------------

    def bind_history(self, key: str, history: Sequence[Mapping[str, Any]]) -> None:
        """Store ``history`` (chat dicts) as the conversation of ``key``.

        A history caught inside a tool call (its last assistant message has tool calls without
        results, followed only by tool results) is stored without that turn in flight, as the
        valid history before it.

        Raises:
            InvalidHistoryError: If ``history`` is not a valid history otherwise.
        """
        messages = normalise_bound(history)
        self.edit_messages(key, lambda ms: ms.__setitem__(slice(None), list(messages)))

    def get_history(self, key: str) -> list[dict[str, Any]]:
        """Return a deep copy of the history stored for ``key``."""
        return copy.deepcopy([dict(m) for m in self.state(key).messages])

    def get_experiences(self, key: str) -> list[dict[str, str]]:
        """Return the experiences of ``key`` as ``{"id", "text"}`` dicts, oldest first."""
        return [dict(e) for e in self.state(key).experiences]

    def get_summaries(self, key: str) -> list[dict[str, Any]]:
        """Return the compaction checkpoints of ``key``, oldest first."""
        return copy.deepcopy([dict(s) for s in self.state(key).summaries])

    def get_forks(self, key: str) -> dict[str, dict[str, Any]]:
        """Return the fork handles of ``key`` by fork id (memory key, task, status, usage)."""
        return copy.deepcopy({k: dict(v) for k, v in self.state(key).forks.items()})

    def keys(self) -> list[str]:
        """Return every key with stored state."""
        with self._lock:
            return sorted(set(self._store.keys()) | set(self._cache))

    def close(self) -> None:
        """Close the store."""
        self._store.close()

    def latest_turn_key(self) -> str | None:
        """The key of the most recently started turn that is still running, if any."""
        with self._lock:
            return next(reversed(self._pending), None)

    # -- experiences and compaction (the runtime.selfref.context primitives) ----------------

    def remember(self, key: str, text: str) -> dict[str, str]:
        """Store ``text`` as a durable experience; return ``{"id", "text"}``.

        Raises:
            InvalidHistoryError: If ``text`` is not a non-empty string.
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidHistoryError("an experience must be a non-empty string")
        with self._lock:
            state = self.state(key)
            exp = {"id": f"exp_{state.next_experience}", "text": text}
            self._save(
                key,
                replace(
                    state,
                    experiences=(*state.experiences, exp),
                    next_experience=state.next_experience + 1,
                ),
            )
            self._queue(key, ExperienceRememberMutation(text))
        return dict(exp)

    def forget(self, key: str, experience_id: str) -> bool:
        """Remove the experience ``experience_id``; return whether it existed."""
        with self._lock:
            state = self.state(key)
            kept = tuple(e for e in state.experiences if e.get("id") != experience_id)
            if len(kept) == len(state.experiences):
                return False
            self._save(key, replace(state, experiences=kept))
            self._queue(key, ExperienceForgetMutation(experience_id))
        return True

    def compact(self, key: str, **fields: Any) -> dict[str, Any]:
        """Replace the working history of ``key`` with a summary (the system prompt stays).

        Keyword fields: ``goal``, ``instruction``, ``discoveries``, ``completed``,
        ``current_status``, ``likely_next_work``, ``relevant_files_directories`` and optional
        ``remember`` (texts stored as experiences).

        The compaction applies at once (SimpleLLMFunc queues it until the tool batch ends);
        a turn bound to ``key`` takes it at its next hook point.

        Returns:
            ``{"status": "applied", "key", "assistant_message", "summary_id", "remembered",
            "replaced_messages"}``.

        Raises:
            InvalidHistoryError: For missing or mistyped fields.
        """
        remember = fields.pop("remember", None) or []
        if not isinstance(remember, list) or not all(isinstance(t, str) for t in remember):
            raise InvalidHistoryError("remember must be a list of strings")
        text, checkpoint = summary_text(fields)
        summary = {"role": "assistant", "content": text}
        with self._lock:
            state = self.state(key)
            system = [m for m in state.messages[:1] if m.get("role") == "system"]
            n = state.next_experience
            new_exps = [{"id": f"exp_{n + i}", "text": t} for i, t in enumerate(remember)]
            summary_id = f"sum_{len(state.summaries) + 1}"
            record = {
                "id": summary_id,
                "created": time.time(),
                "replaced_messages": len(state.messages) - len(system),
                **checkpoint,
            }
            self._save(
                key,
                KeyState(
                    (*system, summary),
                    (*state.experiences, *new_exps),
                    n + len(new_exps),
                    (*state.summaries, record),
                    state.forks,
                ),
            )
            pending = self._pending.get(key)
            if pending is not None:
                pending.mutations.append(
                    ContextSummaryMutation(summary, [{"text": t} for t in remember])
                )
                pending.compacted = True
        return {
            "status": "applied",
            "key": key,
            "assistant_message": dict(summary),
            "summary_id": summary_id,
            "remembered": new_exps,
            "replaced_messages": record["replaced_messages"],
        }

    def inspect(self, key: str) -> dict[str, Any]:
        """Return an overview of ``key``: counts by role, system prompt, experiences, summaries,
        and ``messages`` (a copy of the stored history); ``active_key`` is ``key`` (SimpleLLMFunc's
        name for the key the context primitives act on)."""
        state = self.state(key)
        roles: dict[str, int] = {}
        for message in state.messages:
            role = str(message.get("role"))
            roles[role] = roles.get(role, 0) + 1
        system = state.messages[0] if state.messages else None
        return {
            "key": key,
            "active_key": key,
            "message_count": len(state.messages),
            "messages_by_role": roles,
            "system_prompt": system.get("content")
            if system and system.get("role") == "system"
            else None,
            "experiences": self.get_experiences(key),
            "summary_count": len(state.summaries),
            "last_summary": copy.deepcopy(dict(state.summaries[-1])) if state.summaries else None,
            "messages": copy.deepcopy([dict(m) for m in state.messages]),
        }

    # -- fork handles ------------------------------------------------------------------------

    def open_fork(self, key: str, parent_fork_id: str | None, task: str) -> tuple[str, str]:
        """Register a new fork of ``key``; return its ``(fork_id, memory_key)``.

        The fork's key starts with ``key``'s experiences (same ids); fork numbers only grow.
        """
        with self._lock:
            state = self.state(key)
            n = len(state.forks) + 1
            fork_id = f"{parent_fork_id}.{n}" if parent_fork_id else f"fork_{n}"
            child = f"{key}::fork::{n}"
            handle: dict[str, Any] = {"memory_key": child, "task": task, "status": "running"}
            handle["created"] = time.time()
            self._save(key, replace(state, forks={**state.forks, fork_id: handle}))
            self._save(child, KeyState((), state.experiences, state.next_experience))
        return fork_id, child

    def close_fork(self, key: str, fork_id: str, outcome: Mapping[str, Any]) -> None:
        """Record how the fork ``fork_id`` of ``key`` ended."""
        with self._lock:
            state = self.state(key)
            handle = {**state.forks.get(fork_id, {}), **outcome}
            self._save(key, replace(state, forks={**state.forks, fork_id: handle}))

    # -- internals shared with the memory handle and the run hook --------------------------

    def state(self, key: str) -> KeyState:
        """Return the (cached) state of ``key``; treat it as read-only."""
        with self._lock:
            cached = self._cache.get(key)
            if cached is None:
                cached = self._cache[key] = self._store.load(key)
            return cached

    def edit_messages(self, key: str, edit: Callable[[list[dict[str, Any]]], None]) -> int:
        """Apply ``edit`` to a copy of the messages, validate, store; return the new count.

        Raises:
            InvalidHistoryError: If the result is not a valid history (nothing is stored).
        """
        with self._lock:
            state = self.state(key)
            # Stored dicts are never mutated in place (edits replace whole messages, and new
            # messages arrive deep-copied), so the edit works on a list of the stored dicts and
            # only what it added is parsed again.
            stored = cast(list[dict[str, Any]], list(state.messages))
            known = {id(d): m for d, m in zip(stored, self._typed_messages(key), strict=True)}
            messages = list(stored)
            edit(messages)
            normalised, typed = normalise_edited(messages, known)
            self._save(key, replace(state, messages=normalised))
            self._typed[key] = typed
            pending = self._pending.get(key)
            if pending is not None:
                pending.dirty = True
            return len(normalised)

    def sync_messages(self, key: str, messages: Sequence[Mapping[str, Any]]) -> None:
        """Store the running turn's transcript (no pending edit is recorded)."""
        with self._lock:
            self._save(key, replace(self.state(key), messages=tuple(messages)))

    def open_turn(self, key: str) -> None:
        """Start recording pending edits for ``key`` (a turn bound to it began)."""
        with self._lock:
            # Re-inserted so that the newest turn is last (the active key for primitives).
            self._pending.pop(key, None)
            self._pending[key] = PendingEdits()

    def take_edits(self, key: str) -> PendingEdits:
        """Return and reset the pending edits of ``key``."""
        with self._lock:
            edits = self._pending.get(key) or PendingEdits()
            if key in self._pending:
                self._pending[key] = PendingEdits()
            return edits

    def close_turn(self, key: str) -> None:
        """Stop recording pending edits for ``key``."""
        with self._lock:
            self._pending.pop(key, None)

    def _queue(self, key: str, mutation: ContextMutation) -> None:
        pending = self._pending.get(key)
        if pending is not None:
            pending.mutations.append(mutation)

    def _typed_messages(self, key: str) -> tuple[Message, ...]:
        typed = self._typed.get(key)
        if typed is None:
            typed = self._typed[key] = tuple(message_from_dict(m) for m in self.state(key).messages)
        return typed

    def _save(self, key: str, state: KeyState) -> None:
        self._store.save(key, state)
        self._cache[key] = state
        self._typed.pop(key, None)
