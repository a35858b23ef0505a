"""Trace data: one :class:`TraceRecord` per LLM call, tool call and termination; the totals.

Records are plain frozen dataclasses with JSON round trips (:meth:`TraceRecord.to_dict`,
:meth:`TraceRecord.from_dict`, validated with pydantic because the dicts come back from files).
:func:`timeline` renders records as the step timeline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeAlias

from pydantic import TypeAdapter, ValidationError

from ...exceptions import RunError

__all__ = [
    "RecordKind",
    "TraceRecord",
    "TraceStats",
    "compute_stats",
    "record_from_dict",
    "timeline",
    "trim",
]

RecordKind: TypeAlias = Literal["llm", "tool", "end"]


def trim(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` characters, saying how much was left out."""
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… [+{len(text) - max_chars} chars]"


@dataclass(frozen=True, slots=True)
class TraceRecord:
    """One step of a run.

    Attributes:
        step: Position in the trace, from 0.
        kind: ``"llm"`` (a model call), ``"tool"`` (a tool call) or ``"end"`` (the run ended).
        name: The model, the tool, or how the run ended.
        started: Wall-clock time the step began (the recorder's clock).
        duration_ms: How long it took (as the engine measured it).
        input: What went in, trimmed (the newest message of an LLM call; tool arguments).
        output: What came out, trimmed (reply text and tool calls; the tool result; the answer).
        input_tokens: Prompt tokens of an LLM call, from the provider's usage (end: the total).
        output_tokens: Completion tokens (end: the total).
        total_tokens: Total tokens.
        tokens_estimated: Whether any count was estimated locally.
        model: The model that answered.
        provider: The interface that answered.
        iteration: The loop iteration the step belongs to.
        tool_call_id: The tool call's id (tool steps).
        success: Whether the step succeeded.
        error: Why it failed (``None`` when it did not).
        terminated_by: How the run ended (end steps).
        agent_call_id: The agent call the step belongs to.
        session_id: The session label of that call.
        fork_id: Set for steps of forked sub-agents.
        agent: The agent of a multi-agent run the step belongs to (``None`` otherwise).
        thought: The ReAct view (seed §9.1) of an LLM step: the reply's text.
        action: The tool an LLM step calls (its first call), or a tool step's tool.
        action_input: That call's arguments.
        observation: A tool step's result, as the model sees it (trimmed).
        terminated: Whether the step ended the run (end steps, and the LLM step that answered).
    """

    step: int
    kind: RecordKind
    name: str
    started: float
    duration_ms: float
    input: str = ""
    output: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    tokens_estimated: bool = False
    model: str = ""
    provider: str = ""
    iteration: int = 0
    tool_call_id: str = ""
    success: bool = True
    error: str | None = None
    terminated_by: str = ""
    agent_call_id: str = ""
    session_id: str = ""
    fork_id: str | None = None
    agent: str | None = None
    thought: str | None = None
    action: str | None = None
    action_input: dict[str, Any] | None = None
    observation: str | None = None
    terminated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceRecord:
        """Parse what :meth:`to_dict` wrote (unknown keys are ignored).

        Raises:
            RunError: If ``data`` is not a trace record.
        """
        return record_from_dict(data)


_RECORD = TypeAdapter(TraceRecord)


def record_from_dict(data: Mapping[str, Any]) -> TraceRecord:
    """Parse what :meth:`TraceRecord.to_dict` wrote (unknown keys are ignored).

    Raises:
        RunError: If ``data`` is not a trace record.
    """
    try:
        return _RECORD.validate_python(dict(data))
    except ValidationError as exc:
        raise RunError(f"not a trace record: {exc.errors()[0]['msg']}") from None


@dataclass(frozen=True, slots=True)
class TraceStats:
    """Totals of a trace.

    Attributes:
        total_steps: Records in the trace.
        total_time_ms: Run time: the sum of the ended runs' durations, plus the step durations of
            runs that have not ended.
        total_tokens: Tokens of every LLM call (provider usage).
        prompt_tokens: Prompt tokens of every LLM call.
        completion_tokens: Completion tokens of every LLM call.
        llm_calls: LLM call records.
        tool_calls: Tool call records.
        errors: Failed steps.
        runs: Ended runs.
        terminated_by: How the last ended run ended (``""`` if none has).
    """

    total_steps: int = 0
    total_time_ms: float = 0.0
    total_tokens: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_calls: int = 0
    tool_calls: int = 0
    errors: int = 0
    runs: int = 0
    terminated_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def compute_stats(records: Sequence[TraceRecord]) -> TraceStats:
    """The totals of ``records``."""
    llm = [r for r in records if r.kind == "llm"]
    ends = [r for r in records if r.kind == "end"]
    ended = {r.agent_call_id for r in ends}
    open_time = sum(r.duration_ms for r in records if r.agent_call_id not in ended)
    return TraceStats(
        total_steps=len(records),
        total_time_ms=sum(r.duration_ms for r in ends) + open_time,
        total_tokens=sum(r.total_tokens for r in llm),
        prompt_tokens=sum(r.input_tokens for r in llm),
        completion_tokens=sum(r.output_tokens for r in llm),
        llm_calls=len(llm),
        tool_calls=sum(r.kind == "tool" for r in records),
        errors=sum(not r.success for r in records if r.kind != "end"),
        runs=len(ends),
        terminated_by=ends[-1].terminated_by if ends else "",
    )


def _line(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _seconds(ms: float) -> str:
    return f"{ms / 1000:.2f}s"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _summary(record: TraceRecord, width: int) -> str:
    if not record.success and record.error:
        return "✗ " + _line(record.error, width)
    text = record.output or record.input
    return f'→ "{_line(text, width)}"' if text else "→ (empty)"


def timeline(records: Sequence[TraceRecord], *, width: int = 80, result: bool = True) -> str:
    """The text timeline: one line per step, the final answer, then the totals.

    Args:
        records: The steps.
        width: Longest summary per line.
        result: Add the ``Result:`` line (the command line leaves it out: it printed the
            answer already).

    Example::

        [0] llm   mock-model  (0.01s)  → "Let me check. → weather({"city": "Oslo"})"  [15 tokens]
        [1] tool  weather     (0.00s)  → "sunny in Oslo"
        [2] llm   mock-model  (0.01s)  → "Sunny."  [15 tokens]
        [3] end   answer      (0.03s)  → "Sunny."

        Result: Sunny.
        (4 steps, 0.03s, 30 tokens; 2 LLM calls, 1 tool call, 0 errors)
    """
    name_width = min(24, max((len(r.name) for r in records), default=4))
    lines = []
    for r in records:
        tokens = f"  [{r.total_tokens} tokens]" if r.kind == "llm" and r.total_tokens else ""
        who = f"{r.agent}: " if r.agent else ""
        lines.append(
            f"[{r.step}] {who}{r.kind:<4}  {_line(r.name, name_width):<{name_width}}  "
            f"({_seconds(r.duration_ms)})  {_summary(r, width)}{tokens}"
        )
    stats = compute_stats(records)
    ends = [r for r in records if r.kind == "end"]
    if ends and result:
        lines += ["", f"Result: {_line(ends[-1].output, width * 2)}"]
    lines.append(
        f"({_count(stats.total_steps, 'step')}, {_seconds(stats.total_time_ms)}, "
        f"{_count(stats.total_tokens, 'token')}; {_count(stats.llm_calls, 'LLM call')}, "
        f"{_count(stats.tool_calls, 'tool call')}, {_count(stats.errors, 'error')})"
    )
    return "\n".join(lines)
