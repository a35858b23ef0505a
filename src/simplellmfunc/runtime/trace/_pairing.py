"""Pairing of events into trace records, per agent call (for :class:`~._recorder.TraceRecorder`).

An ``LLMCallStart`` with its ``LLMCallEnd`` (or ``LLMCallError``) makes one ``llm`` record, a
``ToolCallStart`` (or the batch's call, for calls rejected before starting) with its
``ToolCallEnd`` one ``tool`` record, ``ReactEnd`` one ``end`` record. Steps still open when their
run ends (an abort) become failed records, ``cancelled``. Records come out with ``step=0``: the
recorder numbers them as it appends them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..._events import (
    EventOrigin,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMCallStartEvent,
    ReactEndEvent,
    ReactStartEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallsBatchStartEvent,
    ToolCallStartEvent,
)
from .._clock import Clock
from ._record import TraceRecord, trim

__all__ = ["EventPairing"]


@dataclass(slots=True)
class _Open:
    """A started step waiting for its end event."""

    started: float
    mono: float
    name: str
    input: str
    error: str | None = None
    arguments: dict[str, Any] | None = None


@dataclass(slots=True)
class _Call:
    """What the recorder tracks per agent call."""

    started: float
    llm: dict[int, _Open] = field(default_factory=dict)
    tools: dict[str, _Open] = field(default_factory=dict)
    arguments: dict[str, str] = field(default_factory=dict)


def _describe_messages(messages: Sequence[Mapping[str, Any]]) -> str:
    if not messages:
        return ""
    last = messages[-1]
    content = last.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return f"[{len(messages)} messages] {last.get('role', '?')}: {text or ''}"


def _first_action(calls: Sequence[Mapping[str, Any]]) -> tuple[str | None, dict[str, Any] | None]:
    """The name and parsed arguments of the first tool call (``None`` s without one)."""
    if not calls:
        return None, None
    function = calls[0].get("function") or {}
    raw = function.get("arguments")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) and raw else {}
    except ValueError:
        arguments = {"_raw": raw}
    if not isinstance(arguments, dict):
        arguments = {"_value": arguments}
    return str(function.get("name", "?")), arguments


def _describe_reply(text: str, calls: Sequence[Mapping[str, Any]]) -> str:
    parts = [text] if text else []
    for call in calls:
        function = call.get("function") or {}
        parts.append(f"→ {function.get('name', '?')}({function.get('arguments', '')})")
    return " ".join(parts)


class EventPairing:
    """Turns events into records; keeps the open steps of each running agent call.

    Args:
        max_chars: Longest input / output kept per record.
        clock: Wall-clock source for ``started``.
    """

    def __init__(self, max_chars: int, clock: Clock) -> None:
        self.max_chars = max_chars
        self.clock = clock
        self.last_input = ""
        self._calls: dict[str, _Call] = {}

    def clear(self) -> None:
        """Forget every open step."""
        self._calls.clear()

    def consume(self, event: object, origin: EventOrigin) -> list[TraceRecord]:
        """The records ``event`` completes (usually none or one)."""
        key = origin.agent_call_id
        now, mono = self.clock(), time.perf_counter()
        call = self._calls.get(key)
        if call is None:
            call = self._calls[key] = _Call(now)
        match event:
            case ReactStartEvent():
                call.started = now
                self.last_input = event.user_input
            case LLMCallStartEvent():
                text = _describe_messages(event.messages)
                call.llm[event.iteration] = _Open(now, mono, event.model, text)
            case LLMCallErrorEvent():
                pending = call.llm.pop(event.iteration, None)
                return [self._llm_error(event, origin, pending, mono)]
            case LLMCallEndEvent():
                return [self._llm_end(event, origin, call.llm.pop(event.iteration, None))]
            case ToolCallsBatchStartEvent():
                for raw in event.tool_calls:
                    function = raw.get("function") or {}
                    call.arguments[str(raw.get("id"))] = str(function.get("arguments", ""))
            case ToolCallStartEvent():
                arguments = json.loads(json.dumps(dict(event.arguments), default=str))
                text = json.dumps(arguments, ensure_ascii=False)
                call.tools[event.tool_call_id] = _Open(
                    now, mono, event.tool_name, text, arguments=arguments
                )
            case ToolCallErrorEvent():
                pending = call.tools.setdefault(
                    event.tool_call_id,
                    _Open(now, mono, event.tool_name, call.arguments.get(event.tool_call_id, "")),
                )
                pending.error = _error_text(event.error_type, event.message)
            case ToolCallEndEvent():
                pending = call.tools.pop(event.tool_call_id, None)
                call.arguments.pop(event.tool_call_id, None)
                return [self._tool_end(event, origin, pending)]
            case ReactEndEvent():
                del self._calls[key]
                return [*self._cancelled(call, origin, event, mono), self._end(event, origin, call)]
        return []

    # -- record builders ---------------------------------------------------------------------

    @staticmethod
    def _base(origin: EventOrigin) -> dict[str, Any]:
        return {
            "step": 0,  # numbered by the recorder
            "agent_call_id": origin.agent_call_id,
            "session_id": origin.session_id,
            "fork_id": origin.fork_id,
            "agent": origin.agent,
        }

    def _llm_end(
        self, event: LLMCallEndEvent, origin: EventOrigin, pending: _Open | None
    ) -> TraceRecord:
        usage = event.usage
        action, action_input = _first_action(event.tool_calls)
        return TraceRecord(
            **self._base(origin),
            kind="llm",
            name=event.model or (pending.name if pending else ""),
            started=pending.started if pending else self.clock() - event.duration_s,
            duration_ms=event.duration_s * 1000,
            input=trim(pending.input, self.max_chars) if pending else "",
            output=trim(_describe_reply(event.response_text, event.tool_calls), self.max_chars),
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            tokens_estimated=usage.estimated,
            model=event.model,
            provider=event.provider,
            iteration=event.iteration,
            thought=trim(event.response_text, self.max_chars) if event.response_text else None,
            action=action,
            action_input=action_input,
            terminated=not event.tool_calls,
        )

    def _llm_error(
        self, event: LLMCallErrorEvent, origin: EventOrigin, pending: _Open | None, mono: float
    ) -> TraceRecord:
        status = f" (status {event.status})" if event.status is not None else ""
        return TraceRecord(
            **self._base(origin),
            kind="llm",
            name=pending.name if pending else "",
            started=pending.started if pending else self.clock(),
            duration_ms=(mono - pending.mono) * 1000 if pending else 0.0,
            input=trim(pending.input, self.max_chars) if pending else "",
            model=pending.name if pending else "",
            iteration=event.iteration,
            success=False,
            error=trim(f"{event.error_type}{status}: {event.message}", self.max_chars),
        )

    def _tool_end(
        self, event: ToolCallEndEvent, origin: EventOrigin, pending: _Open | None
    ) -> TraceRecord:
        error = pending.error if pending else None
        if not event.success and error is None:
            error = trim(event.result, self.max_chars)
        return TraceRecord(
            **self._base(origin),
            kind="tool",
            name=event.tool_name,
            started=pending.started if pending else self.clock() - event.duration_s,
            duration_ms=event.duration_s * 1000,
            input=trim(pending.input, self.max_chars) if pending else "",
            output=trim(event.result, self.max_chars),
            tool_call_id=event.tool_call_id,
            success=event.success,
            error=error,
            action=event.tool_name,
            action_input=pending.arguments if pending else None,
            observation=trim(event.result, self.max_chars),
        )

    def _cancelled(
        self, call: _Call, origin: EventOrigin, end: ReactEndEvent, mono: float
    ) -> list[TraceRecord]:
        reason = "cancelled" + (f": {end.abort_reason}" if end.abort_reason else "")
        steps = [("llm", "", p) for p in call.llm.values()]
        steps += [("tool", call_id, p) for call_id, p in call.tools.items()]
        return [
            TraceRecord(
                **self._base(origin),
                kind="llm" if kind == "llm" else "tool",
                name=pending.name,
                started=pending.started,
                duration_ms=(mono - pending.mono) * 1000,
                input=trim(pending.input, self.max_chars),
                tool_call_id=call_id,
                success=False,
                error=pending.error or reason,
            )
            for kind, call_id, pending in steps
        ]

    def _end(self, event: ReactEndEvent, origin: EventOrigin, call: _Call) -> TraceRecord:
        usage = event.total_usage
        return TraceRecord(
            **self._base(origin),
            kind="end",
            name=event.terminated_by,
            started=call.started,
            duration_ms=event.duration_s * 1000,
            output=trim(event.final_response, self.max_chars),
            input_tokens=usage.prompt_tokens,
            output_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            tokens_estimated=usage.estimated,
            iteration=event.iterations,
            success=event.error is None,
            error=event.error,
            terminated_by=event.terminated_by,
            terminated=True,
        )


def _error_text(error_type: str, message: str) -> str:
    """``"<type>: <message>"``, the type once: a tool's message reads ``"Error: <type>: ..."``;
    a ``ToolRetry`` (a failed PyRepl cell) is its message alone."""
    text = message.removeprefix("Error: ")
    if error_type == "ToolRetry" or text.startswith(f"{error_type}:"):
        return text
    return f"{error_type}: {text}"
