"""The two phases of a ReAct iteration, as steps over :class:`RunState`.

``think``: hook mutations → compile → LLM call → assistant mutation (→ repair feedback).
``act``: tool batch → tool mutations (→ abort mutations) → after-batch hook mutations.
Neither edits the transcript directly: every change is a ``ContextMutation``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .._abort import AbortSignal
from .._events import (
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
)
from .._messages import AssistantMessage, ToolCall
from .._mutations import (
    AssistantMessageMutation,
    AssistantTruncatedMutation,
    ContextMutation,
    UserMessageMutation,
)
from ..exceptions import ProviderError
from ._compile import compile_request
from ._emit import Emitter
from ._invocation import Invocation, RunView
from ._llm_step import TextChunk, call_llm
from ._plan import plan_reply
from ._scheduler import run_tool_batch
from ._state import RunState
from ._windowing import windowed

__all__ = ["aborted", "act", "think"]


def _apply(state: RunState, mutations: Sequence[ContextMutation]) -> None:
    state.transcript.apply_all(mutations)


def aborted(state: RunState, abort: AbortSignal | None) -> bool:
    """Whether the run was aborted (recording it in ``state`` if so)."""
    if abort is not None and abort.aborted:
        state.terminated_by = "aborted"
        state.abort_reason = abort.reason
        return True
    return False


def _view(invocation: Invocation, state: RunState, emitter: Emitter) -> RunView:
    return RunView(
        state.transcript, state.iteration, emitter.agent_call_id, invocation, state.context
    )


async def think(
    invocation: Invocation, state: RunState, emitter: Emitter, abort: AbortSignal | None
) -> tuple[ToolCall, ...] | None:
    """The LLM phase of the next iteration.

    Returns:
        The tool calls to run; ``()`` when the answer was sent back for repair (the run goes
        on without tools); ``None`` when the run is over (answer, cap, abort).

    Raises:
        ProviderError: When the LLM call fails after retries.
    """
    if aborted(state, abort):
        return None
    state.iteration += 1
    if emitter.wants_events:
        await emitter.event(ReactIterationStartEvent(state.iteration))
    for hook in invocation.hooks:
        _apply(state, list(await hook.before_llm_call(_view(invocation, state, emitter))))
    final = (
        invocation.max_tool_calls is not None
        and state.tool_iterations >= invocation.max_tool_calls
        and bool(invocation.tools)
    )
    window = await windowed(invocation, state)
    request = compile_request(invocation, state.transcript, final_answer=final, window=window)
    try:
        outcome = await call_llm(invocation, request, state.iteration, emitter, abort)
    except ProviderError:
        fallback = _last_assistant_text(state) if final else None
        if fallback is None:
            raise
        # Seed 001 §5.3: the extraction call failed, so the last assistant text is the answer.
        state.final_text, state.terminated_by = fallback, "max_steps"
        await _iteration_end(emitter, state, 0)
        return None
    if outcome.response is None:  # aborted mid-call
        aborted(state, abort)
        state.final_text = outcome.partial_text
        state.transcript.apply(AssistantTruncatedMutation(outcome.partial_text, state.abort_reason))
        await _iteration_end(emitter, state, 0)
        return None
    response = outcome.response
    state.last_response = response
    state.usage = state.usage + response.usage
    message = response.message
    plan = plan_reply(invocation, message, state.iteration, final=final)
    calls = _unique_ids(state, plan.calls)
    state.transcript.apply(_assistant_mutation(message, calls))
    if calls and message.content and _wants_reply_text(invocation, emitter):
        await emitter.raw(TextChunk(message.content))
    if calls:
        return calls
    if plan.feedback is not None:  # a malformed text-protocol call: it costs a step
        state.tool_iterations += 1
        state.transcript.apply(plan.feedback)
        await _iteration_end(emitter, state, 0)
        return ()
    state.final_text = plan.answer
    state.terminated_by = plan.terminated_by
    repair = _repair(invocation, state)
    if repair is not None:
        state.transcript.apply(repair)
    await _iteration_end(emitter, state, 0)
    return None if repair is None else ()


async def act(
    invocation: Invocation,
    state: RunState,
    emitter: Emitter,
    abort: AbortSignal | None,
    calls: tuple[ToolCall, ...],
) -> bool:
    """The tool phase of the current iteration; returns whether the run is over (aborted)."""
    state.tool_iterations += 1
    state.tool_calls += len(calls)
    started = time.perf_counter()
    if emitter.wants_events:
        batch_calls = tuple(c.to_dict() for c in calls)
        await emitter.event(ToolCallsBatchStartEvent(state.iteration, batch_calls))
    batch = await run_tool_batch(invocation, calls, emitter, abort)
    _apply(state, batch.mutations)
    if emitter.wants_events:
        duration = time.perf_counter() - started
        await emitter.event(
            ToolCallsBatchEndEvent(state.iteration, batch.succeeded, batch.failed, duration)
        )
    done = aborted(state, abort)
    if not done:
        for hook in invocation.hooks:
            _apply(state, list(await hook.after_tool_batch(_view(invocation, state, emitter))))
    await _iteration_end(emitter, state, len(calls))
    return done


async def _iteration_end(emitter: Emitter, state: RunState, tool_calls: int) -> None:
    if emitter.wants_events:
        await emitter.event(ReactIterationEndEvent(state.iteration, tool_calls))


def _wants_reply_text(invocation: Invocation, emitter: Emitter) -> bool:
    """Whether text sent along with tool calls goes out as a text item (plain, non-stream mode).

    Streamed text was sent as it arrived; raw mode gets the provider's response instead.
    """
    return emitter.wants_text and not emitter.wants_raw and not invocation.stream


def _repair(invocation: Invocation, state: RunState) -> ContextMutation | None:
    """The feedback for a final answer that fails the answer check, while repairs remain."""
    check = invocation.answer_check
    if check is None:
        return None
    problem = check(state.final_text)
    if problem is None or state.repairs >= invocation.max_repairs:
        return None
    state.repairs += 1
    return UserMessageMutation({"role": "user", "content": problem})


def _last_assistant_text(state: RunState) -> str | None:
    for message in reversed(state.transcript.messages):
        if isinstance(message, AssistantMessage) and message.content:
            return message.content
    return None


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
