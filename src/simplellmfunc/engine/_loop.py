"""The async ReAct loop: :class:`ReactRun` drives the phases of :mod:`._steps` over a run state.

One iteration = hook mutations → LLM call → assistant mutation → tool batch → tool mutations
(→ abort mutations). The loop never edits the transcript directly: every change is a
``ContextMutation`` applied by the ``Transcript``.

A run advances one phase per :meth:`ReactRun.step`, so a caller can act between phases outside
any cancel scope or task group: plain, non-streaming ``@llm_chat`` yields what the emitter
buffered during a phase and needs no task of its own. :func:`run_react` runs the steps to the end
(the event pump runs it in its own task, for live events). Steps are plain coroutines: no async
generator sits between a consumer and the provider's socket (each one costs CPU on every
suspension of the HTTP call).

:meth:`ReactRun.run_to_end` (what :func:`run_react` does) runs the phases inside a task group of
the run's own, handed to hooks through ``RunView.context``: hooks start background work there
(SelfReference forks), and whatever is still running when the run ends is cancelled. A stepped
run has no task group.
"""

from __future__ import annotations

import time
from types import TracebackType

import anyio

from .._abort import AbortSignal
from .._events import ReactEndEvent, ReactStartEvent
from .._messages import ToolCall
from .._transcript import Transcript
from ..exceptions import ProviderError
from ._emit import Emitter
from ._invocation import Invocation, RunView
from ._run_context import RunContext
from ._state import RunResult, RunState
from ._steps import act, think

__all__ = ["ReactRun", "RunResult", "RunState", "run_react"]

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
    run = ReactRun(invocation, transcript, emitter, abort, user_input=user_input)
    await run.run_to_end()
    return run.state.result()


class ReactRun:
    """One run of the loop, advanced phase by phase; use it as an async context manager.

    ``async with`` emits the start event; :meth:`step` runs the next phase (the LLM phase of
    an iteration, or its tool phase). A run left early (an exception, a cancellation, a
    consumer closing its generator) still calls the hooks' ``on_end``, shielded with a bound.

    Args:
        invocation: The call's configuration.
        transcript: The working transcript (the run edits it through mutations).
        emitter: Where events and items go.
        abort: The abort signal of the call, if any.
        user_input: The user's text, for the start event.
    """

    __slots__ = ("_abort", "_calls", "_done", "_emitter", "_invocation", "_user_input", "state")

    def __init__(
        self,
        invocation: Invocation,
        transcript: Transcript,
        emitter: Emitter,
        abort: AbortSignal | None = None,
        *,
        user_input: str = "",
    ) -> None:
        self.state = RunState(transcript)
        if invocation.hooks:  # only hooks use it (and it ties the state in a reference cycle)
            self.state.context = RunContext(self.state, emitter, abort)
        self._invocation = invocation
        self._emitter = emitter
        self._abort = abort
        self._user_input = user_input
        self._calls: tuple[ToolCall, ...] = ()
        self._done = False

    async def __aenter__(self) -> ReactRun:
        if self._emitter.wants_events:
            tools = tuple(t.name for t in self._invocation.tools)
            await self._emitter.event(ReactStartEvent(self._user_input, tools))
        return self

    async def run_to_end(self) -> None:
        """Enter the run and step it to the end, inside a task group of its own.

        Hooks reach the task group through ``RunView.context``; tasks still running when the
        run ends are cancelled (and waited for) before this returns. The task group exists only
        when a hook declares ``needs_task_group`` (it costs an event-loop turn per run).

        Raises:
            ProviderError: When an LLM call fails after retries (the run ends with an event).
        """
        if not any(hook.needs_task_group for hook in self._invocation.hooks):
            # Nothing will start background work: no task group (and no cancel) to pay for.
            async with self:
                while await self.step():
                    pass
            return
        context = self.state.context
        try:
            async with anyio.create_task_group() as tasks:
                if context is not None:
                    context.bind(tasks)
                try:
                    async with self:
                        while await self.step():
                            pass
                finally:
                    if context is not None:
                        context.bind(None)
                    tasks.cancel_scope.cancel()
        except BaseExceptionGroup as group:
            # The group only wraps what the run raised (background tasks catch their own
            # failures): callers get the run's exception unchanged, as without a task group.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def step(self) -> bool:
        """Run the next phase; return whether the run goes on.

        Raises:
            ProviderError: When an LLM call fails after retries (the run ends with an event).
        """
        if self._done:
            return False
        invocation, state, emitter, abort = (
            self._invocation,
            self.state,
            self._emitter,
            self._abort,
        )
        try:
            if self._calls:
                calls, self._calls = self._calls, ()
                over = await act(invocation, state, emitter, abort, calls)
            else:
                next_calls = await think(invocation, state, emitter, abort)
                over = next_calls is None
                self._calls = next_calls or ()
        except ProviderError as exc:
            state.terminated_by = "error"
            self._done = True
            await _end(invocation, state, emitter, error=str(exc))
            raise
        if over:
            self._done = True
            await _end(invocation, state, emitter)
        return not over

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._done:
            return
        # Left early: hooks still learn of the end, even while being cancelled.
        self._done = True
        with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
            await _notify_hooks(self._invocation, self.state, self._emitter)


async def _notify_hooks(invocation: Invocation, state: RunState, emitter: Emitter) -> None:
    for hook in invocation.hooks:
        await hook.on_end(
            RunView(
                state.transcript, state.iteration, emitter.agent_call_id, invocation, state.context
            )
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
