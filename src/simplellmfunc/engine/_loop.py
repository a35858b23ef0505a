"""The async ReAct loop: a handful of steps over an explicit run state.

One iteration = hook mutations → LLM call → assistant mutation → tool batch → tool mutations
(→ abort mutations). The loop never edits the transcript directly: every change is a
``ContextMutation`` applied by the ``Transcript``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .._abort import AbortSignal
from .._events import (
    ReactEndEvent,
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    ReactStartEvent,
    TerminatedBy,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
)
from .._messages import AssistantMessage, Message, ToolCall
from .._mutations import (
    AssistantMessageMutation,
    AssistantTruncatedMutation,
    ContextMutation,
)
from .._transcript import Transcript
from .._usage import Usage
from ..exceptions import ProviderError
from ..providers._base import LLMResponse
from ._compile import compile_request
from ._emit import Emitter
from ._invocation import Invocation, RunView
from ._llm_step import TextChunk, call_llm
from ._scheduler import run_tool_batch

__all__ = ["RunResult", "RunState", "run_react"]


@dataclass(slots=True)
class RunState:
    """The mutable state of one run; owned by that run alone."""

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

    @property
    def aborted(self) -> bool:
        """Whether an abort ended the run."""
        return self.terminated_by == "aborted"


async def run_react(
    invocation: Invocation,
    transcript: Transcript,
    emitter: Emitter,
    abort: AbortSignal | None = None,
    *,
    user_input: str = "",
) -> RunResult:
    """Run the ReAct loop until the model answers, the cap is hit or the run is aborted.

    Raises:
        ProviderError: When an LLM call fails after retries (the run ends with an event).
    """
    state = RunState(transcript)
    await emitter.event(ReactStartEvent(user_input, tuple(t.name for t in invocation.tools)))
    try:
        while not await _iteration(invocation, state, emitter, abort):
            pass
    except ProviderError as exc:
        state.terminated_by = "error"
        await _end(invocation, state, emitter, error=str(exc))
        raise
    await _end(invocation, state, emitter)
    return RunResult(
        state.final_text,
        state.transcript.messages,
        state.usage,
        state.terminated_by,
        state.iteration,
        state.tool_calls,
        state.abort_reason,
        state.last_response,
    )


def _apply(state: RunState, mutations: tuple[ContextMutation, ...] | list[ContextMutation]) -> None:
    state.transcript.apply_all(mutations)


def _aborted(state: RunState, abort: AbortSignal | None) -> bool:
    if abort is not None and abort.aborted:
        state.terminated_by = "aborted"
        state.abort_reason = abort.reason
        return True
    return False


async def _hooks_before(invocation: Invocation, state: RunState, emitter: Emitter) -> None:
    for hook in invocation.hooks:
        view = RunView(state.transcript, state.iteration, emitter.agent_call_id, invocation)
        _apply(state, list(await hook.before_llm_call(view)))


async def _hooks_after(invocation: Invocation, state: RunState, emitter: Emitter) -> None:
    for hook in invocation.hooks:
        view = RunView(state.transcript, state.iteration, emitter.agent_call_id, invocation)
        _apply(state, list(await hook.after_tool_batch(view)))


async def _iteration(
    invocation: Invocation, state: RunState, emitter: Emitter, abort: AbortSignal | None
) -> bool:
    """Run one iteration; return whether the run is over."""
    if _aborted(state, abort):
        return True
    state.iteration += 1
    await emitter.event(ReactIterationStartEvent(state.iteration))
    await _hooks_before(invocation, state, emitter)
    final = (
        invocation.max_tool_calls is not None
        and state.tool_iterations >= invocation.max_tool_calls
        and bool(invocation.tools)
    )
    request = compile_request(invocation, state.transcript, final_answer=final)
    outcome = await call_llm(invocation, request, state.iteration, emitter, abort)
    if outcome.response is None:
        _aborted(state, abort)
        state.final_text = outcome.partial_text
        _apply(state, [AssistantTruncatedMutation(outcome.partial_text, state.abort_reason)])
        await emitter.event(ReactIterationEndEvent(state.iteration))
        return True
    response = outcome.response
    state.last_response = response
    state.usage = state.usage + response.usage
    message = response.message
    calls = _unique_ids(state, () if final else message.tool_calls)
    _apply(state, [_assistant_mutation(message, calls)])
    if calls and message.content and emitter.wants_text and not invocation.stream:
        await emitter.raw(TextChunk(message.content))
    if not calls:
        state.final_text = response.text
        state.terminated_by = "max_steps" if final else "answer"
        await emitter.event(ReactIterationEndEvent(state.iteration))
        return True
    done = await _tool_phase(invocation, state, emitter, abort, calls)
    await emitter.event(ReactIterationEndEvent(state.iteration, len(calls)))
    return done


def _unique_ids(state: RunState, calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """Rename call ids already used in this transcript (some servers reuse ``call_0``)."""
    if not calls:
        return calls
    if state.used_ids is None:
        state.used_ids = {
            c.id
            for m in state.transcript.messages
            if isinstance(m, AssistantMessage)
            for c in m.tool_calls
        }
    renamed = []
    for n, call in enumerate(calls):
        call_id = call.id
        if call_id in state.used_ids:
            call_id = f"{call.id}_{state.iteration}_{n}"
        state.used_ids.add(call_id)
        renamed.append(call if call_id == call.id else ToolCall(call_id, call.name, call.arguments))
    return tuple(renamed)


def _assistant_mutation(message: AssistantMessage, calls: tuple[ToolCall, ...]) -> ContextMutation:
    return AssistantMessageMutation(
        content=message.content,
        tool_calls=[c.to_dict() for c in calls],
        reasoning_details=[dict(r) for r in message.reasoning_details],
    )


async def _tool_phase(
    invocation: Invocation,
    state: RunState,
    emitter: Emitter,
    abort: AbortSignal | None,
    batch_calls: tuple[ToolCall, ...],
) -> bool:
    state.tool_iterations += 1
    state.tool_calls += len(batch_calls)
    started = time.perf_counter()
    if emitter.wants_events:
        await emitter.event(
            ToolCallsBatchStartEvent(state.iteration, tuple(c.to_dict() for c in batch_calls))
        )
    batch = await run_tool_batch(invocation, batch_calls, emitter, abort)
    _apply(state, list(batch.mutations))
    await emitter.event(
        ToolCallsBatchEndEvent(
            state.iteration, batch.succeeded, batch.failed, time.perf_counter() - started
        )
    )
    if batch.aborted or _aborted(state, abort):
        _aborted(state, abort)
        return True
    await _hooks_after(invocation, state, emitter)
    return False


async def _end(
    invocation: Invocation, state: RunState, emitter: Emitter, *, error: str | None = None
) -> None:
    for hook in invocation.hooks:
        await hook.on_end(
            RunView(state.transcript, state.iteration, emitter.agent_call_id, invocation)
        )
    if emitter.wants_events:
        await emitter.event(
            ReactEndEvent(
                state.final_text,
                tuple(state.transcript.to_dicts()),
                state.usage,
                state.iteration,
                state.tool_calls,
                time.perf_counter() - state.started,
                state.terminated_by,
                state.terminated_by == "aborted",
                state.abort_reason,
                error,
            )
        )
