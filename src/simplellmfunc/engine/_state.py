"""The explicit state of one ReAct run, and how a run ended."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._events import TerminatedBy
from .._messages import Message, ToolCall
from .._transcript import Transcript
from .._usage import Usage
from ..providers import LLMResponse
from ._runaway import Signature

__all__ = ["RunResult", "RunState"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: the answer, the final transcript and the totals."""

    text: str
    messages: tuple[Message, ...]
    usage: Usage
    terminated_by: TerminatedBy
    iterations: int
    tool_calls: int
    abort_reason: str = ""
    response: LLMResponse | None = None
    pending: tuple[ToolCall, ...] = ()
    """``terminated_by="deferred"``: the calls of deferred tools the app must answer."""

    @property
    def aborted(self) -> bool:
        """Whether an abort ended the run."""
        return self.terminated_by == "aborted"


@dataclass(slots=True)
class RunState:
    """The mutable state of one run; owned by that run alone.

    Attributes:
        transcript: The working transcript (edited only through mutations).
        iteration: Iterations started so far.
        tool_iterations: Iterations that ran tools (what ``max_tool_calls`` caps).
        tool_calls: Tool calls run so far.
        usage: Usage summed over every LLM call of the run.
        final_text: The answer (or the partial reply of an aborted call).
        terminated_by: Why the run ended (meaningful once it has).
        abort_reason: The abort's reason, if it was aborted.
        last_response: The last complete LLM response (while the next LLM call is in flight,
            a copy whose ``raw`` is a read-only mapping of the same JSON, decoded on access).
        started: ``perf_counter`` at the start.
        used_ids: Tool call ids in the transcript (filled on first need).
        repairs: Answers sent back to the model for repair so far.
        window_summary: The history window's LLM summary, keyed by how many messages it covers.
        batches: The signature of each tool batch so far (repetition detection).
        loop_warned: The model was told its batches repeat (the next repetition ends the run).
        answer_from: JSON protocol, after a repeated call: the next LLM call must give the
            final answer, and is sent the transcript up to this index (before the repetition).
        pending: The deferred calls the run ended on (``terminated_by="deferred"``).
        answer_from: After a repeated call (protocols that answer repeats): the next LLM call
            must give the final answer, and is sent the transcript up to this index (before the
            repetition).
        answer_retries: Empty or truncated answers asked for again so far.
        stop_after: The reply called tools and announced its answer: once they ran, the run
            ends with this answer (and ``terminated_by``).
    """

    transcript: Transcript
    iteration: int = 0
    tool_iterations: int = 0
    tool_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    final_text: str = ""
    terminated_by: TerminatedBy = "answer"
    abort_reason: str = ""
    last_response: LLMResponse | None = None
    started: float = field(default_factory=time.perf_counter)
    used_ids: set[str] | None = None
    repairs: int = 0
    window_summary: tuple[int, str] | None = None
    batches: list[Signature] = field(default_factory=list)
    loop_warned: bool = False
    answer_from: int | None = None
    pending: tuple[ToolCall, ...] = ()
    answer_retries: int = 0
    stop_after: str | None = None

    def result(self) -> RunResult:
        """The result of the run (call once it has ended)."""
        return RunResult(
            self.final_text,
            self.transcript.messages,
            self.usage,
            self.terminated_by,
            self.iteration,
            self.tool_calls,
            self.abort_reason,
            self.last_response,
            self.pending,
        )
