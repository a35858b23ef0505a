"""The engine's one entry point: a :class:`Run` of the async ReAct loop.

One iteration = hook mutations → LLM call → assistant mutation → tool batch → tool mutations
(→ abort mutations), as the two phases of :mod:`._phases` over the run's :class:`RunContext`.
The loop never edits the transcript directly: every change is a ``ContextMutation``.

Both decorators do the same three things: build an :class:`Invocation` and a ``Transcript``,
make a :class:`Run` saying what they want out of it (events, text deltas, raw provider items),
and iterate it. Iterating yields those items, then the :class:`RunResult` last. How the run is
driven follows from what was asked:

* **In the caller's task, phase by phase** when nothing has to arrive while a phase runs (plain
  calls): items buffered during a phase are yielded between phases, outside any cancel scope or
  task group, and no task is created.
* **In a task of its own** (:func:`._pump.event_pump`) when items must arrive live (events,
  stream deltas) or a hook starts background work (SelfReference forks): the run then gets a task
  group, handed to hooks through ``RunView.context``; whatever is still running when the run ends
  is cancelled.

Phases are plain coroutines: no async generator sits between a consumer and the provider's
socket (each one costs CPU on every suspension of the HTTP call).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncGenerator
from dataclasses import replace
from types import TracebackType
from typing import Any

import anyio

from .._abort import AbortSignal, PauseSignal
from .._events import EventOrigin, EventYield, ReactEndEvent, ReactStartEvent
from .._messages import ToolCall
from .._transcript import Transcript
from ..exceptions import IncompleteAnswerError, ProviderError, UserError
from ._approval import ApprovalDecision, answer_pending
from ._deferred import act_or_defer
from ._emit import Emitter, current_tool_call_id
from ._invocation import Invocation, RunContext, RunHook
from ._llm_call import RawItem, TextChunk
from ._phases import think
from ._pump import Send, event_pump
from ._state import RunResult, RunState
from ._steps import current_step_runner

__all__ = ["Run", "RunItem"]

RunItem = EventYield | TextChunk | RawItem | RunResult
"""What iterating a :class:`Run` yields; the :class:`RunResult` comes last."""

_CLEANUP_SECONDS = 5.0  # bound on the shielded end-of-run hook calls after a cancellation


def new_call_id() -> str:
    """A short random id for one agent call."""
    return os.urandom(6).hex()


class Run:
    """One run of the ReAct loop over ``transcript``.

    Iterate it (``async for item in Run(...)``) to get what was asked for and the result, or
    ``await run.result()`` for the result alone. The lower-level interface, for callers that
    drive the phases themselves, is ``async with run: while await run.step(): ...``.

    Args:
        invocation: The call's configuration.
        transcript: The working transcript (the run edits it through mutations).
        emitter: An emitter already connected to a stream (a child run's, see
            :meth:`child_of`); ``None``: the run makes its own when iterated.
        abort: The call's abort signal, if any.
        user_input: The user's text, for the start event.
        events: Yield typed events (``EventYield``).
        text: Yield reply text as :class:`TextChunk` items (deltas when streaming; the text
            sent along with tool calls otherwise).
        raw: Yield provider responses / stream events as :class:`RawItem` items.
        origin: The event origin (``None``: a new agent call id).
        pause: A pause signal: the run stops before its next LLM call once it is set
            (``terminated_by="paused"``); a new run over the same transcript resumes it.
    """

    __slots__ = ("_calls", "_done", "_own_emitter", "_user_input", "context")

    def __init__(
        self,
        invocation: Invocation,
        transcript: Transcript,
        emitter: Emitter | None = None,
        abort: AbortSignal | None = None,
        *,
        user_input: str = "",
        events: bool = False,
        text: bool = False,
        raw: bool = False,
        origin: EventOrigin | None = None,
        pause: PauseSignal | None = None,
    ) -> None:
        self._own_emitter = emitter is None
        if emitter is None:
            origin = origin or EventOrigin(invocation.session_id, new_call_id())
            emitter = Emitter(
                None,
                origin,
                wants_events=events,
                wants_text=text,
                wants_raw=raw,
                func_name=invocation.func_name,
            )
        steps = current_step_runner()
        if isinstance(steps, RunHook) and steps not in invocation.hooks:
            invocation = replace(invocation, hooks=(*invocation.hooks, steps))
        self.context = RunContext(invocation, RunState(transcript), emitter, abort, pause, steps)
        self._user_input = user_input
        self._calls: tuple[ToolCall, ...] = ()
        self._done = False

    @classmethod
    def child_of(
        cls,
        parent: RunContext,
        invocation: Invocation,
        transcript: Transcript,
        *,
        abort: AbortSignal | None = None,
        user_input: str = "",
    ) -> Run:
        """A run started by ``parent`` (a fork, a sub-agent) whose events go into the parent's
        stream, tagged with the child's origin (``invocation.fork_id`` / ``fork_depth``, the
        parent's call id) and a call id of its own. Text and raw items stay the parent's.

        Drive it with :meth:`run_to_end`; add its usage to the parent with
        ``parent.add_usage`` if it counts toward the parent's total.
        """
        base = parent.origin
        origin = EventOrigin(
            base.session_id,
            new_call_id(),
            0,
            parent.emitter.agent_call_id,
            invocation.fork_id,
            invocation.fork_depth,
            parent_tool_call_id=current_tool_call_id(),
        )
        emitter = parent.emitter.derive(origin)
        return cls(invocation, transcript, emitter, abort, user_input=user_input)

    def answer(self, request_id: str, answer: ApprovalDecision) -> None:
        """Answer the approval request ``request_id`` (a call id) of this run.

        Raises:
            AnswerRefusedError: If no call of this run waits under that id (answered, timed
                out, never asked).
        """
        answer_pending(self.context.approvals, request_id, answer)

    @property
    def state(self) -> RunState:
        """The run's state (its transcript, counters and usage)."""
        return self.context.state

    def __aiter__(self) -> AsyncGenerator[RunItem, None]:
        if not self._own_emitter:
            raise UserError("a run given an emitter is driven with run_to_end, not iterated")
        if self._live():
            # The pump itself, no generator around it (a layer less per streamed item): the
            # consumer closing it early cancels the run, in the consumer's task.
            return event_pump(self._pumped, unwrap=True)
        return self._items()

    async def result(self) -> RunResult:
        """Run to the end and return the result; nothing is emitted (no sink is connected).

        Raises:
            ProviderError: When an LLM call fails after retries (the run ends with an event).
        """
        await self.run_to_end()
        return self.state.result()

    def _live(self) -> bool:
        """Whether items must arrive while a phase runs: the run then needs its own task."""
        invocation = self.context.invocation
        events, text, _ = self.context.emitter.requested
        return events or (invocation.stream and text) or _needs_task_group(invocation)

    async def _items(self) -> AsyncGenerator[RunItem, None]:
        # Plain mode only yields between phases: the run is driven here, in this task.
        buffer: list[Any] = []

        async def send(item: Any) -> None:
            buffer.append(item)

        self.context.emitter.connect(send)
        async with self:
            going = True
            while going:
                going = await self.step()
                while buffer:
                    yield buffer.pop(0)
        yield self.state.result()

    async def _pumped(self, send: Send) -> RunResult:
        self.context.emitter.connect(send)
        await self.run_to_end()
        return self.state.result()

    async def __aenter__(self) -> Run:
        context = self.context
        if context.emitter.wants_events:
            tools = tuple(t.name for t in context.invocation.tools)
            await context.emitter.event(ReactStartEvent(self._user_input, tools))
        return self

    async def run_to_end(self) -> None:
        """Enter the run and step it to the end, inside a task group of its own.

        Hooks reach the task group through ``RunView.context``; tasks still running when the
        run ends are cancelled (and waited for) before this returns. The task group exists only
        when a hook declares ``needs_task_group`` (it costs an event-loop turn per run).

        Raises:
            ProviderError: When an LLM call fails after retries (the run ends with an event).
        """
        if not _needs_task_group(self.context.invocation):
            # Nothing will start background work: no task group (and no cancel) to pay for.
            async with self:
                while await self.step():
                    pass
            return
        context = self.context
        try:
            async with anyio.create_task_group() as tasks:
                context.bind(tasks)
                try:
                    async with self:
                        while await self.step():
                            pass
                finally:
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
            IncompleteAnswerError: When the final answer stays empty or truncated (policy
                ``"raise"``; the run ends with an event).
        """
        if self._done:
            return False
        context = self.context
        try:
            if self._calls:
                calls, self._calls = self._calls, ()
                over = await act_or_defer(context, calls)
            else:
                next_calls = await think(context)
                over = next_calls is None
                self._calls = next_calls or ()
        except (ProviderError, IncompleteAnswerError) as exc:
            context.state.terminated_by = "error"
            self._done = True
            await _end(context, error=str(exc))
            raise
        if over:
            self._done = True
            await _end(context)
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
            await _notify_hooks(self.context)


def _needs_task_group(invocation: Invocation) -> bool:
    return any(hook.needs_task_group for hook in invocation.hooks)


async def _notify_hooks(context: RunContext) -> None:
    for hook in context.invocation.hooks:
        await hook.on_end(context.view())


async def _end(context: RunContext, *, error: str | None = None) -> None:
    await _notify_hooks(context)
    if context.emitter.wants_events:
        state = context.state
        await context.emitter.event(
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
