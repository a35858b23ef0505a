"""The two phases of a ReAct iteration, as steps over one :class:`RunContext`.

``think``: hook mutations → history window → compile → LLM call → assistant mutation
(→ repair feedback). ``act``: tool batch → tool mutations (→ abort mutations) → after-batch hook
mutations. Neither edits the transcript directly: every change is a ``ContextMutation``, but
for the model's reply itself, which goes in through ``Transcript.append_reply`` (the checks of
an ``AssistantMessageMutation`` without building one that nobody reads).
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
from ..exceptions import IncompleteAnswerError, ProviderError
from ..providers import LLMRequest, count_message_tokens
from ._compile import FINAL_ANSWER_INSTRUCTION, compile_request
from ._emit import Emitter
from ._invocation import Invocation, RunContext
from ._llm_call import TextChunk, call_llm, report_answer
from ._parked import park, unpark
from ._protocol import StepInfo
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

__all__ = ["EMPTY_NOTE", "SUMMARY_INSTRUCTION", "TRUNCATED_NOTE", "act", "think"]

EMPTY_NOTE = "Your reply had no answer. Give your final answer now, in plain words."
TRUNCATED_NOTE = (
    "Your reply was cut off by the output limit. Give your complete final answer again, shorter."
)

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
        IncompleteAnswerError: When the final answer stays empty or truncated after the
            retries and the policy is ``"raise"``.
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
        step=StepInfo(state.tool_iterations + 1, cap),
    )
    # The previous reply, parked while the call waits (see _parked): only an aborted or failed
    # call leaves it the last one.
    state.last_response = park(state.last_response)
    try:
        outcome = await call_llm(run, request)
    except ProviderError:
        state.last_response = unpark(state.last_response)
        fallback = _last_assistant_text(run) if final else None
        if fallback is None:
            raise
        # Seed 001 §5.3: the extraction call failed, so the last assistant text is the answer.
        state.final_text, state.terminated_by = fallback, "max_steps"
        await _iteration_end(emitter, state, 0)
        return None
    except BaseException:  # boundary: cleanup, re-raised: the previous reply is unparked
        state.last_response = unpark(state.last_response)
        raise
    if outcome.response is None:  # aborted mid-call
        state.last_response = unpark(state.last_response)
        run.aborted()
        state.final_text = outcome.partial_text
        state.transcript.apply(AssistantTruncatedMutation(outcome.partial_text, state.abort_reason))
        await _iteration_end(emitter, state, 0)
        return None
    response = outcome.response
    state.last_response = response
    state.usage = state.usage + response.usage
    protocol = invocation.protocol
    reason: TerminatedBy | None = "max_steps" if capped else "answer" if final else None
    plan = protocol.plan(
        response.message,
        tools=[t.name for t in invocation.tools],
        options=invocation.options,
        iteration=state.iteration,
        final=reason,
    )
    calls = _unique_ids(state, plan.calls)
    message = protocol.stored(response.message, plan)
    state.transcript.append_reply(_reply(message, calls))
    if calls and message.content and _wants_reply_text(invocation, emitter):
        prose = protocol.visible(message.content)
        if prose:
            await emitter.raw(TextChunk(prose))
    if calls:
        if plan.stop_after:
            state.stop_after, state.terminated_by = plan.answer, plan.terminated_by
        return calls
    if plan.feedback is not None:  # a malformed text-protocol call: it costs a step
        state.tool_iterations += 1
        state.transcript.apply(plan.feedback)
        await _iteration_end(emitter, state, 0)
        return ()
    state.final_text = plan.answer
    state.terminated_by = plan.terminated_by
    if invocation.stream and outcome.shown is not None:
        # An answer not read from the reply as it streamed (a repaired step, say): not yet shown.
        rest = protocol.rest_of_answer(plan.answer, outcome.shown)
        if rest:
            await report_answer(emitter, rest, outcome.shown + rest)
    retry = _incomplete(run, plan.truncated or response.finish_reason == "length")
    if retry is None:
        retry = _repair(invocation, state)
    if retry is not None:
        state.transcript.apply(retry)
    await _iteration_end(emitter, state, 0)
    return None if retry is None else ()


async def act(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """The tool phase of the current iteration; returns whether the run is over (aborted, or
    stopped in a loop)."""
    state, emitter, options = run.state, run.emitter, run.invocation.options
    calls_signature = signature(calls)
    repeats = state.batches and state.batches[-1] == calls_signature
    if repeats and run.invocation.protocol.answers_repeats and state.stop_after is None:
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
        if state.stop_after is not None:  # the reply announced its answer with these calls
            state.final_text, done = state.stop_after, True
            # The history ends on the answer, as every finished run's does.
            state.transcript.apply(AssistantMessageMutation(content=state.final_text))
    await _iteration_end(emitter, state, len(calls))
    return done


async def _repeated(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """A batch that repeats the previous one is answered, not run, and the next step must be
    the final answer (protocols that answer repeats: small models repeat a call after seeing
    its result)."""
    state = run.state
    state.answer_from = len(state.transcript.messages) - 1  # before the repeating message
    repeat = run.invocation.protocol.repeat_result
    state.transcript.apply_all([ToolResultMutation(c.id, repeat(c.name)) for c in calls])
    await _iteration_end(run.emitter, state, 0)
    return False


async def _stop_loop(run: RunContext, calls: tuple[ToolCall, ...]) -> bool:
    """End a run whose model repeats after the warning: its calls are answered, not run."""
    state = run.state
    state.transcript.apply_all(
        [ToolCancelledMutation(c.id, c.name, LOOP_STOP_REASON) for c in calls]
    )
    state.terminated_by = "loop"
    state.final_text = _last_assistant_text(run) or ""
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


def _last_assistant_text(run: RunContext) -> str | None:
    """The prose of the last assistant message that has any (never protocol text)."""
    visible = run.invocation.protocol.visible
    for message in reversed(run.state.transcript.messages):
        if isinstance(message, AssistantMessage) and message.content:
            prose = visible(message.content)
            if prose:
                return prose
    return None


def _incomplete(run: RunContext, truncated: bool) -> ContextMutation | None:
    """An empty or truncated final answer: the note asking for it again while retries remain;
    then the typed outcome (``IncompleteAnswerError``, or the run flagged).

    Raises:
        IncompleteAnswerError: When retries are spent and the policy is ``"raise"``.
    """
    state, options = run.state, run.invocation.options
    if truncated:
        reason: TerminatedBy = "truncated"
    elif not state.final_text.strip():
        reason = "empty"
    else:
        return None
    if state.answer_retries < options.answer_retries:
        state.answer_retries += 1
        note = TRUNCATED_NOTE if reason == "truncated" else EMPTY_NOTE
        return UserMessageMutation({"role": "user", "content": note})
    if options.incomplete_answer == "flag":
        state.terminated_by = reason
        return None
    what = "cut off by the output limit (max_tokens)" if reason == "truncated" else "empty"
    raise IncompleteAnswerError(
        f"the final answer was {what} after {state.answer_retries} retr"
        f"{'y' if state.answer_retries == 1 else 'ies'}",
        reason=reason,
        text=state.final_text,
        messages=state.transcript.to_dicts(),
    )


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


def _reply(message: AssistantMessage, calls: tuple[ToolCall, ...]) -> AssistantMessage:
    """The reply as the history keeps it: with its calls as run (ids made unique)."""
    if calls == message.tool_calls:
        return message
    return AssistantMessage(message.content, calls, message.reasoning_details)


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
