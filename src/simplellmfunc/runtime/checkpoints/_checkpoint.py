"""Checkpoint: a versioned JSON snapshot of an agent's state.

A checkpoint holds the conversation history (chat dicts), the agent's memory items, the state
of a SelfReference per key (history, experiences, summaries), the trace records, the state of
named shared memories (a team's ``SharedMemory``, seed §20.2), the last input and counters
(steps, calls, tokens, time). File layout (one JSON object)::

    {"version": "1.0.0", "timestamp": 1711454400.0, "description": "...", "last_input": "...",
     "history": [...], "memory": [...], "self_reference": {"key": {...}}, "trace": [...],
     "shared_memories": {"main": {"counter": 42}}, "counters": {"steps": 5, ...},
     "metadata": {...}}

Version rules on load: another major version is refused (:class:`ConfigError`), another minor
version is loaded with a warning (``UserWarning``), another patch version silently. Values that
JSON cannot carry are stored as their ``str()``.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
from pydantic import TypeAdapter, ValidationError

from ..._messages import Message, history_from_dicts
from ..._persist import json_text
from ...exceptions import ConfigError
from ..stores import ScopedStore
from ..trace import TraceRecord, TraceRecorder

if TYPE_CHECKING:
    from ...builtin import SelfReference

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "SharedState",
    "check_version",
    "serialize_value",
]

CHECKPOINT_VERSION = "1.0.0"


class SharedState(Protocol):
    """What a checkpoint needs of a shared memory (``multiagent.SharedMemory`` is one)."""

    async def snapshot(self) -> dict[str, Any]:
        """Every key and value."""
        ...

    async def set(self, key: str, value: Any) -> None:
        """Write one value."""
        ...


def serialize_value(value: Any) -> Any:
    """``value`` as JSON data: containers recursively, anything else JSON lacks as ``str()``."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): serialize_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [serialize_value(v) for v in value]
    return str(value)


def _parse_version(text: object) -> tuple[int, int, int]:
    try:
        major, minor, patch = (int(p) for p in str(text).split("."))
    except ValueError:
        raise ConfigError(f"checkpoint version {text!r} is not MAJOR.MINOR.PATCH") from None
    return major, minor, patch


def check_version(version: object, current: str = CHECKPOINT_VERSION) -> None:
    """Apply the version rules to a checkpoint of ``version``.

    Raises:
        ConfigError: If the version is malformed or its major version differs.
    """
    found, ours = _parse_version(version), _parse_version(current)
    if found[0] != ours[0]:
        raise ConfigError(
            f"checkpoint version {version} is incompatible with version {current} "
            "(the major version differs)"
        )
    if found[1] != ours[1]:
        warnings.warn(
            f"checkpoint version {version} differs from {current} in its minor version; "
            "loading it anyway",
            UserWarning,
            stacklevel=3,
        )


@dataclass
class _Data:
    """The file format, as pydantic validates it."""

    version: str
    timestamp: float
    description: str
    last_input: str
    history: list[dict[str, Any]]
    memory: list[dict[str, Any]]
    self_reference: dict[str, dict[str, Any]]
    trace: list[dict[str, Any]]
    shared_memories: dict[str, dict[str, Any]]
    counters: dict[str, float]
    metadata: dict[str, Any]


_DATA = TypeAdapter(_Data)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """An agent's state at one moment (JSON-shaped values; treat them as read-only).

    Attributes:
        history: The conversation as chat dicts.
        memory: Memory items (``StoreItem.to_dict()``), newest first.
        self_reference: Per SelfReference key: ``history``, ``experiences``, ``summaries``.
        trace: Trace records as dicts.
        shared_memories: Per name: the keys and values of a shared memory.
        last_input: The last user input.
        counters: Numbers worth keeping (steps, calls, tokens, time, or the caller's own).
        description: A label.
        timestamp: When it was taken (``time.time``).
        metadata: Anything else the caller wants kept (JSON values).
        version: The format version it was written with.
    """

    history: tuple[Mapping[str, Any], ...] = ()
    memory: tuple[Mapping[str, Any], ...] = ()
    self_reference: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    trace: tuple[Mapping[str, Any], ...] = ()
    shared_memories: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    last_input: str = ""
    counters: Mapping[str, float] = field(default_factory=dict)
    description: str = ""
    timestamp: float = 0.0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    version: str = CHECKPOINT_VERSION

    @classmethod
    async def capture(
        cls,
        *,
        history: Sequence[Mapping[str, Any]] = (),
        memory: ScopedStore | None = None,
        self_reference: SelfReference | None = None,
        recorder: TraceRecorder | None = None,
        shared_memories: Mapping[str, SharedState] | None = None,
        last_input: str | None = None,
        counters: Mapping[str, float] | None = None,
        description: str = "",
        metadata: Mapping[str, Any] | None = None,
    ) -> Checkpoint:
        """Take a checkpoint of the given pieces (each is optional); ``shared_memories`` are
        a team's shared memories by name (``{"main": SharedMemory(...)}``).

        ``last_input`` defaults to the recorder's; the recorder's totals are the default
        counters (``counters`` adds to or overrides them).

        Raises:
            InvalidHistoryError: If ``history`` is not a valid history.
            RunError: If the memory store fails.
        """
        history_from_dicts(history)  # refuse what could not be resumed later
        items = await memory.items() if memory is not None else []
        shared = {name: await m.snapshot() for name, m in (shared_memories or {}).items()}
        selfref = {}
        if self_reference is not None:
            selfref = await anyio.to_thread.run_sync(_self_reference_state, self_reference)
        totals: dict[str, float] = {}
        if recorder is not None:
            stats = recorder.stats()
            totals = {
                "steps": stats.total_steps,
                "llm_calls": stats.llm_calls,
                "tool_calls": stats.tool_calls,
                "total_tokens": stats.total_tokens,
                "total_time_ms": stats.total_time_ms,
            }
        return cls(
            history=tuple(serialize_value(list(history))),
            memory=tuple(serialize_value([i.to_dict() for i in items])),
            self_reference=serialize_value(selfref),
            trace=tuple(recorder.to_dicts()) if recorder is not None else (),
            shared_memories=serialize_value(shared),
            last_input=last_input if last_input is not None else _last_input(recorder),
            counters={**totals, **(counters or {})},
            description=description,
            timestamp=time.time(),
            metadata=serialize_value(dict(metadata or {})),
        )

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the file format."""
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "description": self.description,
            "last_input": self.last_input,
            "history": [dict(m) for m in self.history],
            "memory": [dict(i) for i in self.memory],
            "self_reference": {k: dict(v) for k, v in self.self_reference.items()},
            "trace": [dict(r) for r in self.trace],
            "shared_memories": {k: dict(v) for k, v in self.shared_memories.items()},
            "counters": dict(self.counters),
            "metadata": dict(self.metadata),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        """The file text."""
        return json_text(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """Parse a checkpoint object, applying the version rules.

        Raises:
            ConfigError: For another major version or a malformed checkpoint.
        """
        if not isinstance(data, Mapping):
            raise ConfigError("a checkpoint must be a JSON object")
        check_version(data.get("version"))
        defaults = cls().to_dict()
        try:
            parsed = _DATA.validate_python({**defaults, **data})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ConfigError(f"malformed checkpoint at {where}: {first['msg']}") from None
        return cls(
            history=tuple(parsed.history),
            memory=tuple(parsed.memory),
            self_reference=parsed.self_reference,
            trace=tuple(parsed.trace),
            shared_memories=parsed.shared_memories,
            last_input=parsed.last_input,
            counters=parsed.counters,
            description=parsed.description,
            timestamp=parsed.timestamp,
            metadata=parsed.metadata,
            version=parsed.version,
        )

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        """Parse the file text.

        Raises:
            ConfigError: If it is not JSON, another major version or malformed.
        """
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"a checkpoint must be JSON: {exc}") from None
        return cls.from_dict(data)

    # -- restoring ---------------------------------------------------------------------------

    def messages(self) -> tuple[Message, ...]:
        """The history as typed messages (to resume a run with the engine).

        Raises:
            InvalidHistoryError: If the stored history is not valid.
        """
        return history_from_dicts(self.history)

    def trace_records(self) -> list[TraceRecord]:
        """The trace records.

        Raises:
            RunError: If a stored record is malformed.
        """
        return [TraceRecord.from_dict(r) for r in self.trace]

    async def restore_memory(self, memory: ScopedStore, *, clear: bool = True) -> int:
        """Write the memory items back (their remaining TTL kept); return how many.

        Items that expired since the checkpoint are skipped. ``clear`` empties the namespace
        first, so it holds exactly what the checkpoint held.

        Raises:
            RunError: If the store fails.
        """
        if clear:
            await memory.clear()
        now, restored = memory.now(), 0
        for item in reversed(self.memory):  # oldest first, so the newest stays newest
            expires = item.get("expires")
            if expires is not None and float(expires) <= now:
                continue
            ttl = None if expires is None else float(expires) - now
            await memory.set(str(item["key"]), item.get("value"), ttl=ttl)
            restored += 1
        return restored

    async def restore_shared_memory(self, target: SharedState, name: str = "main") -> int:
        """Write the shared memory saved as ``name`` back into ``target``; return how many keys.

        Raises:
            ConfigError: If the checkpoint holds no shared memory of that name.
            RunError: If the store fails.
        """
        if name not in self.shared_memories:
            known = ", ".join(sorted(self.shared_memories)) or "none"
            raise ConfigError(f"the checkpoint has no shared memory {name!r} (it has: {known})")
        state = self.shared_memories[name]
        for key, value in state.items():
            await target.set(key, value)
        return len(state)

    async def restore_self_reference(self, target: SelfReference) -> None:
        """Bind each stored key's history and experiences into ``target``.

        Experiences are remembered again in order (in a fresh SelfReference they get the same
        ids; in one that already has experiences, new ids).

        Raises:
            InvalidHistoryError: If a stored history is not valid.
        """
        await anyio.to_thread.run_sync(_restore_self_reference, target, self.self_reference)

    def restore_trace(self, recorder: TraceRecorder) -> None:
        """Load the trace records into ``recorder`` (it continues under a new trace id).

        Raises:
            RunError: If a stored record is malformed.
        """
        recorder.load(self.trace_records())


def _last_input(recorder: TraceRecorder | None) -> str:
    return recorder.last_input if recorder is not None else ""


def _self_reference_state(target: SelfReference) -> dict[str, dict[str, Any]]:
    keys = target.keys()
    return {
        key: {
            "history": target.get_history(key),
            "experiences": target.get_experiences(key),
            "summaries": target.get_summaries(key),
        }
        for key in keys
    }


def _restore_self_reference(target: SelfReference, state: Mapping[str, Mapping[str, Any]]) -> None:
    for key, entry in state.items():
        target.bind_history(key, list(entry.get("history") or []))
        for experience in entry.get("experiences") or []:
            target.remember(key, str(experience.get("text", "")))
