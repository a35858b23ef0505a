"""The two phases of a ReAct iteration, as steps over one :class:`RunContext`.

``think``: hook mutations → history window → compile → LLM call → assistant mutation
(→ repair feedback). ``act``: tool batch → tool mutations (→ abort mutations) → after-batch hook
mutations. Neither edits the transcript directly: every change is a ``ContextMutation``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio.to_thread

from .._events import (
    ReactIterationEndEvent,
    ReactIterationStartEvent,
    TerminatedBy,
    ToolCallsBatchEndEvent,
    ToolCallsBatchStartEvent,
)
from .._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    UserMessage,
    message_to_dict,
)
from .._mutations import (
    AssistantMessageMutation,
    AssistantTruncatedMutation,
    ContextMutation,
    ContextReplaceMutation,
    ToolCancelledMutation,
    ToolResultMutation,
    UserMessageMutation,
)
from ..exceptions import ProviderError
from ..providers import LLMRequest, count_message_tokens
from ._compile import FINAL_ANSWER_INSTRUCTION, compile_request
from ._emit import Emitter
from ._invocation import Invocation, RunContext
from ._json_protocol import repeat_result
from ._llm_call import TextChunk, call_llm, report_answer
from ._plan import plan_reply
from ._runaway import (
    LOOP_STOP_REASON,
    append_note,
    budget_note,
    loop_note,
    loop_period,
    signature,
)
from ._scheduler import run_tool_batch
from ._state import RunState
from ._window import apply_window, truncation_summary

__all__ = ["SUMMARY_INSTRUCTION", "act", "think"]

SUMMARY_INSTRUCTION = (
    "Summarize the conversation below for the assistant who continues it: the user's goals, "
    "facts learned, decisions, tool results that still matter and open questions. Be concise."
)


async def think(run: RunContext) -> tuple[ToolCall, ...] | None:
    """The LLM phase of the next iteration.

    Returns:
        The tool calls to run; ``()`` when the answer was sent back for repair (the run goes
        on without tools); ``None`` when the run is over (answer, cap, abort).

    Raises:
        ProviderError: When the LLM call fails after retries.
    """
    if run.aborted() or run.paused():
        return None
    invocation, state, emitter = run.invocation, run.state, run.emitter
    state.iteration += 1
    if emitter.wants_events:
        await emitter.event(ReactIterationStartEvent(state.iteration))
    for hook in invocation.hooks:
        state.transcript.apply_all(list(await hook.before_llm_call(run.view())))
    invocation = run.invocation  # a hook may have added tools (RunContext.add_tools)
    cap = invocation.options.max_tool_calls
    capped = cap is not None and state.tool_iterations >= cap and bool(invocation.tools)
    repeated = state.answer_from is not None
    final = capped or repeated
    if repeated:
        # What the model saw before it repeated the call: with the answer-only schema, a small
        # model answers from the observation (with the repetition in view, it echoes the notes).
        window: Sequence[Message] | None = state.transcript.messages[: state.answer_from]
    else:
        window = await _windowed(invocation, state)
    request = compile_request(
        invocation,
        state.transcript,
        final_answer=final,
        window=window,
        instruction=FINAL_ANSWER_INSTRUCTION if capped else "",
    )
    try:
        outcome = await call_llm(run, request)
    except ProviderError:
        fallback = _last_assistant_text(state) if final else None
        if fallback is None:
            raise
        # Seed 001 §5.3: the extraction call failed, so the last assistant text is the answer.
        state.final_text, state.terminated_by = fallback, "max_steps"
        await _iteration_end(emitter, state, 0)
        return None
    if outcome.response is None:  # aborted mid-call
        run.aborted()
        state.final_text = outcome.partial_text
        state.transcript.apply(AssistantTruncatedMutation(outcome.partial_text, state.abort_reason))
        await _iteration_end(emitter, state, 0)
        return None
    response = outcome.response
    state.last_response = response
    state.usage = state.usage + response.usage
    message = response.message
    reason: TerminatedBy | None = "max_steps" if capped else "answer" if final else None
    plan = plan_reply(invocation, message, state.iteration, final=reason)
    calls = _unique_ids(state, plan.calls)
    if invocation.json_protocol and plan.feedback is None:
        # The step's JSON is protocol, not prose: the history keeps the call or the answer.
        message = AssistantMessage("" if calls else plan.answer, (), message.reasoning_details)
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
    if invocation.json_protocol and invocation.stream and plan.answer != outcome.reported_answer:
        # An answer not read from a valid step (a capped run's last reply, say): not yet shown.
        await report_answer(emitter, plan.answer)
    repair = _repair(invocation, state)
    if repair is not None:
        state.transcript.apply(repair)
    await _iteration_end(emitter, state, 0)
    return None if repair is None else ()


async def act(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """The tool phase of the current iteration; returns whether the run is over (aborted, or
    stopped in a loop)."""
    state, emitter, options = run.state, run.emitter, run.invocation.options
    calls_signature = signature(calls)
    if run.invocation.json_protocol and state.batches and state.batches[-1] == calls_signature:
        return await _repeated(run, calls)
    state.batches.append(calls_signature)
    period = loop_period(state.batches, options.loop_window)
    if period is not None and state.loop_warned:
        return await _stop_loop(run, calls)
    state.tool_iterations += 1
    state.tool_calls += len(calls)
    started = time.perf_counter()
    if emitter.wants_events:
        batch_calls = tuple(c.to_dict() for c in calls)
        await emitter.event(ToolCallsBatchStartEvent(state.iteration, batch_calls))
    batch = await run_tool_batch(run, calls)
    mutations = batch.mutations
    state.loop_warned = period is not None
    if period is not None:
        mutations = append_note(mutations, loop_note(calls, period))
    cap = options.max_tool_calls
    if cap is not None and 1 <= cap - state.tool_iterations <= max(1, cap // 5):
        mutations = append_note(mutations, budget_note(cap - state.tool_iterations))
    state.transcript.apply_all(mutations)
    if emitter.wants_events:
        duration = time.perf_counter() - started
        await emitter.event(
            ToolCallsBatchEndEvent(
                state.iteration, batch.succeeded, batch.failed, duration, batch.ends
            )
        )
    done = run.aborted()
    if not done:
        for hook in run.invocation.hooks:
            state.transcript.apply_all(list(await hook.after_tool_batch(run.view())))
    await _iteration_end(emitter, state, len(calls))
    return done


async def _repeated(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """JSON protocol: a batch that repeats the previous one is answered, not run, and the next
    step must be the final answer (small models repeat a call after seeing its result)."""
    state = run.state
    state.answer_from = len(state.transcript.messages) - 1  # before the repeating message
    state.transcript.apply_all([ToolResultMutation(c.id, repeat_result(c.name)) for c in calls])
    await _iteration_end(run.emitter, state, 0)
    return False


async def _stop_loop(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """End a run whose model repeats after the warning: its calls are answered, not run."""
    state = run.state
    state.transcript.apply_all(
        [ToolCancelledMutation(c.id, c.name, LOOP_STOP_REASON) for c in calls]
    )
    state.terminated_by = "loop"
    state.final_text = _last_assistant_text(state) or ""
    await _iteration_end(run.emitter, state, 0)
    return True


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


async def _windowed(invocation: Invocation, state: RunState) -> Sequence[Message] | None:
    """The messages to send under the invocation's history window (``None``: no window)."""
    window = invocation.options.history_window
    if window is None:
        return None
    budget = window.budget(invocation.llm.context_window)
    model = invocation.llm.model_name

    def count(messages: Sequence[Message]) -> int:
        return count_message_tokens(messages, model)

    messages = state.transcript.messages

    def fit(summary: str | None) -> tuple[tuple[Message, ...], list[Message]]:
        return apply_window(messages, window, count, budget, summary)

    # Token counting is CPU work (and the first use loads the encoding): off the event loop.
    sent, dropped = await anyio.to_thread.run_sync(fit, None)
    if dropped and window.strategy == "summarize":
        summary = await _summary(invocation, state, dropped)
        sent, dropped = await anyio.to_thread.run_sync(fit, summary)
    if dropped and window.rewrite_history:
        state.transcript.apply(ContextReplaceMutation([message_to_dict(m) for m in sent]))
        return None
    return sent if dropped else None


async def _summary(invocation: Invocation, state: RunState, dropped: list[Message]) -> str:
    """An LLM summary of the dropped messages, computed once per size of the dropped part."""
    cached = state.window_summary
    if cached is not None and cached[0] == len(dropped):
        return cached[1]
    request = LLMRequest(
        (SystemMessage(SUMMARY_INSTRUCTION), UserMessage(truncation_summary(dropped, 20_000)))
    )
    response = await invocation.llm.complete(request)
    state.usage = state.usage + response.usage
    text = f"[Summary of {len(dropped)} earlier messages]\n{response.text}"
    state.window_summary = (len(dropped), text)
    return text
