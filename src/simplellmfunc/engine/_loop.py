"""The async ReAct loop: :func:`react_steps` drives the phases of :mod:`._steps` over a run state.

One iteration = hook mutations → LLM call → assistant mutation → tool batch → tool mutations
(→ abort mutations). The loop never edits the transcript directly: every change is a
``ContextMutation`` applied by the ``Transcript``.

The driver is an async generator that pauses after each phase, outside any cancel scope or task
group. A caller that only needs what the emitter buffered during a phase (plain, non-streaming
``@llm_chat``) yields it from the pause and needs no task of its own; :func:`run_react` drives
the steps to the end in the current task (the event pump runs it in its own).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from contextlib import aclosing

import anyio

from .._abort import AbortSignal
from .._events import ReactEndEvent, ReactStartEvent
from .._transcript import Transcript
from ..exceptions import ProviderError
from ._emit import Emitter
from ._invocation import Invocation, RunView
from ._state import RunResult, RunState
from ._steps import act, think

__all__ = ["RunResult", "RunState", "react_steps", "run_react"]

_CLEANUP_SECONDS = 5.0  # bound on the shielded end-of-run hook calls after a cancellation


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
    steps = react_steps(invocation, state, emitter, abort, user_input=user_input)
    async with aclosing(steps):
        async for _ in steps:
            pass
    return state.result()


async def react_steps(
    invocation: Invocation,
    state: RunState,
    emitter: Emitter,
    abort: AbortSignal | None = None,
    *,
    user_input: str = "",
) -> AsyncGenerator[None, None]:
    """Run the loop over ``state``, pausing (yielding ``None``) after each phase.

    Use ``contextlib.aclosing`` when iterating: a run closed early (or cancelled) still calls
    the hooks' ``on_end``, shielded with a bound. ``state.result()`` holds the outcome once the
    iteration ends.

    Raises:
        ProviderError: When an LLM call fails after retries (the run ends with an event).
    """
    if emitter.wants_events:
        await emitter.event(ReactStartEvent(user_input, tuple(t.name for t in invocation.tools)))
    try:
        while True:
            calls = await think(invocation, state, emitter, abort)
            yield
            if calls is None:
                break
            if calls:
                done = await act(invocation, state, emitter, abort, calls)
                yield
                if done:
                    break
    except ProviderError as exc:
        state.terminated_by = "error"
        await _end(invocation, state, emitter, error=str(exc))
        raise
    except (GeneratorExit, anyio.get_cancelled_exc_class()):
        # The consumer left or an outer scope was cancelled: hooks still learn of the end.
        with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
            await _notify_hooks(invocation, state, emitter)
        raise
    await _end(invocation, state, emitter)


async def _notify_hooks(invocation: Invocation, state: RunState, emitter: Emitter) -> None:
    for hook in invocation.hooks:
        await hook.on_end(
            RunView(state.transcript, state.iteration, emitter.agent_call_id, invocation)
        )


async def _end(
    invocation: Invocation, state: RunState, emitter: Emitter, *, error: str | None = None
) -> None:
    await _notify_hooks(invocation, state, emitter)
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
