"""The tool-batch scheduler: every call of one assistant turn runs concurrently.

Results are applied in the original call order; a failing or timed-out tool becomes an error
result and never cancels its siblings; an abort cancels the batch and answers every unfinished
call with a ``ToolCancelledMutation``, so the history stays valid. Tools with an ``abort_grace``
(they stop on the abort signal themselves and return what they have, like PyRepl's cell) get
that long to return before the batch is cancelled. Every call of the batch gets its end event:
a cancelled one a ``ToolCallErrorEvent`` (``error_type="Cancelled"``) and a ``ToolCallEndEvent``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from .._abort import AbortSignal
from .._events import ToolCallEndEvent, ToolCallErrorEvent, ToolCallStartEvent
from .._messages import ToolCall
from .._mutations import (
    ContextMutation,
    MultimodalToolResultMutation,
    ToolCancelledMutation,
    ToolResultMutation,
)
from ..exceptions import StepInterruptedError
from ..providers import parse_arguments
from ..tools import (
    FunctionTool,
    RenderedResult,
    Tool,
    ToolContext,
    ToolEventEmitter,
    render_error,
    render_result,
    render_unknown_tool,
)
from ._approval import Refusal, edited_note
from ._emit import Emitter, enter_tool_call, leave_tool_call
from ._gate import approval_reason, gate, needs_gate
from ._invocation import Invocation, RunContext, running_tools
from ._pump import being_cancelled
from ._steps import StepSlot, run_in_slot

__all__ = ["BatchResult", "run_tool_batch"]


@dataclass(frozen=True, slots=True)
class _Outcome:
    mutation: ContextMutation
    success: bool
    end: ToolCallEndEvent | None  # built only when someone reads events


@dataclass(frozen=True, slots=True)
class _Failure:
    error_type: str
    text: str


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The mutations of one batch (results in call order, then cancellations)."""

    mutations: tuple[ContextMutation, ...]
    succeeded: int
    failed: int
    aborted: bool
    ends: tuple[ToolCallEndEvent, ...] = ()


async def run_tool_batch(run: RunContext, calls: Sequence[ToolCall]) -> BatchResult:
    """Run ``calls`` concurrently and return their mutations."""
    outcomes: list[_Outcome | None] = [None] * len(calls)
    abort = run.abort
    restore = running_tools(run)
    try:
        if abort is None:
            await _run_all(run, calls, outcomes)
            return _collect(run.invocation, calls, outcomes, abort)
        started = time.perf_counter()
        grace = _abort_grace(run.invocation, calls)
        with anyio.CancelScope() as scope:
            remove = abort.add_callback(lambda _reason: _stop(scope, grace))
            try:
                await _run_all(run, calls, outcomes)
            finally:
                remove()
    finally:
        restore()
    result = _collect(run.invocation, calls, outcomes, abort)
    if result.aborted and run.emitter.wants_events:
        await _announce_cancelled(run.emitter, calls, outcomes, result, started)
    return result


def _abort_grace(invocation: Invocation, calls: Sequence[ToolCall]) -> float:
    """How long an abort waits for the batch's tools to return on their own."""
    graces = [getattr(invocation.tool_named(c.name), "abort_grace", 0.0) for c in calls]
    return max(graces, default=0.0)


def _stop(scope: anyio.CancelScope, grace: float) -> None:
    try:
        now = anyio.current_time()
    except RuntimeError:  # aborted from outside the event loop: no clock to wait by
        grace = 0.0
    if grace <= 0:
        scope.cancel()
    else:
        scope.deadline = min(scope.deadline, now + grace)


async def _announce_cancelled(
    emitter: Emitter,
    calls: Sequence[ToolCall],
    outcomes: Sequence[_Outcome | None],
    result: BatchResult,
    started: float,
) -> None:
    """The end events of the calls an abort cancelled (a UI closes their spinners on them)."""
    duration = time.perf_counter() - started
    cancelled = {
        m.tool_call_id: m for m in result.mutations if isinstance(m, ToolCancelledMutation)
    }
    for call, outcome in zip(calls, outcomes, strict=True):
        mutation = cancelled.get(call.id)
        if outcome is None and mutation is not None:
            reason = mutation.abort_reason or "cancelled"
            await emitter.event(ToolCallErrorEvent(call.id, call.name, "Cancelled", reason))
            text = mutation.to_message().text  # what the model reads
            await emitter.event(ToolCallEndEvent(call.id, call.name, text, False, duration))


async def _run_all(
    run: RunContext, calls: Sequence[ToolCall], outcomes: list[_Outcome | None]
) -> None:
    slots = _slots(run, calls)  # taken now, in call order: a durable re-run asks the same
    if len(calls) == 1:  # nothing to run beside it: no task group, no task
        outcomes[0] = await _run_call(run, calls[0], slots[0])
        return
    cap = run.invocation.options.max_tool_concurrency
    limiter = anyio.CapacityLimiter(cap) if cap else None

    async def run_one(index: int, call: ToolCall) -> None:
        if limiter is None:
            outcomes[index] = await _run_call(run, call, slots[index])
            return
        async with limiter:
            outcomes[index] = await _run_call(run, call, slots[index])

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # another event loop (trio): an anyio task group
        async with anyio.create_task_group() as group:
            for index, call in enumerate(calls):
                group.start_soon(run_one, index, call)
        return
    await _gather([run_one(index, call) for index, call in enumerate(calls)])


async def _gather(coros: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``coros`` as asyncio tasks and wait for them all: an anyio task group's semantics
    (cancelling the caller cancels every call and waits for it; a call that raises cancels the
    others and its error comes out in a ``BaseExceptionGroup``) at a fifth of its cost per task,
    which a batch of quick tools pays once per call.

    A call cancelled here sees ``Task.cancelling()``, so :func:`being_cancelled` tells it from a
    stray cancellation exactly as under a task group; a timeout or limiter inside a call is an
    anyio scope of that call's task, as before.
    """
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(coro) for coro in coros]
    cancelled: BaseException | None = None
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except asyncio.CancelledError as exc:  # the caller (an abort's scope, a timeout) cancels
        cancelled = exc
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    while pending:
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError as exc:  # anyio re-delivers until its scope is left
            cancelled = cancelled or exc
        pending = [task for task in pending if not task.done()]
    if cancelled is not None:
        raise cancelled
    errors = [e for t in tasks if not t.cancelled() and (e := t.exception()) is not None]
    if errors:
        raise BaseExceptionGroup("unhandled errors in a TaskGroup", errors)


def _slots(run: RunContext, calls: Sequence[ToolCall]) -> list[StepSlot | None]:
    """One step slot per call of a durable run (``None`` each without a step runner)."""
    steps = run.steps
    if steps is None:
        return [None] * len(calls)
    slots: list[StepSlot | None] = []
    for call in calls:
        tool = run.invocation.tool_named(call.name)
        idempotent = tool.idempotent if tool is not None else True
        asks = call.id if tool is not None and needs_gate(run, tool) else None
        slots.append(steps.slot("tool", call.name, idempotent=idempotent, approval_id=asks))
    return slots


def _collect(
    invocation: Invocation,
    calls: Sequence[ToolCall],
    outcomes: Sequence[_Outcome | None],
    abort: AbortSignal | None,
) -> BatchResult:
    done = [o for o in outcomes if o is not None]
    reason = abort.reason if abort is not None else ""
    cancelled = [
        ToolCancelledMutation(call.id, call.name, _cancel_reason(invocation, call, reason))
        for call, outcome in zip(calls, outcomes, strict=True)
        if outcome is None
    ]
    succeeded = sum(o.success for o in done)
    return BatchResult(
        tuple(o.mutation for o in done) + tuple(cancelled),
        succeeded,
        len(calls) - succeeded,
        bool(cancelled),
        tuple(o.end for o in done if o.end is not None),
    )


def _cancel_reason(invocation: Invocation, call: ToolCall, reason: str) -> str:
    tool = invocation.tool_named(call.name)
    if isinstance(tool, FunctionTool) and not _is_async(tool):
        # A sync tool runs in a worker thread, which cannot be interrupted.
        return f"{reason} (the tool runs in a thread and may still finish in the background)"
    return reason


def _is_async(tool: FunctionTool) -> bool:
    return inspect.iscoroutinefunction(tool.func)


async def _run_call(run: RunContext, call: ToolCall, slot: StepSlot | None) -> _Outcome:
    invocation, emitter = run.invocation, run.emitter
    started = time.perf_counter()
    tool = invocation.tool_named(call.name)
    if tool is None:
        text = render_unknown_tool(call.name, [t.name for t in invocation.tools])
        return await _failure(call, emitter, "UnknownTool", text, started)
    arguments, problem = parse_arguments(call.arguments)
    if arguments is None:
        text = f"Error: the arguments of {call.name} are not valid JSON: {problem}"
        return await _failure(call, emitter, "InvalidArguments", text, started)
    edited = False
    if needs_gate(run, tool) and (reason := approval_reason(run, tool, arguments)):
        # Approval: this call waits in its own task while its siblings run on.
        gated = await gate(run, tool, call, arguments, reason)
        if isinstance(gated, Refusal):
            return await _failure(call, emitter, gated.error_type, gated.text, started)
        edited, arguments = gated is not arguments, gated
    if emitter.wants_events:
        await emitter.event(ToolCallStartEvent(call.id, call.name, arguments))
    timeout = tool.timeout or invocation.options.tool_timeout
    rendered: RenderedResult | _Failure | None = None
    if slot is None:  # no step runner: the bare coroutine, no closure or step frame
        running = _invoke(run, tool, call, arguments)
    else:

        async def invoke() -> RenderedResult | _Failure:
            return await _invoke(run, tool, call, arguments)

        running = _stepped(slot, emitter, call, invoke)
    if timeout is None:  # no deadline: no cancel scope either
        rendered = await running
    else:
        with anyio.move_on_after(timeout):
            rendered = await running
    if rendered is None:
        text = f"Error: tool {call.name} timed out after {timeout:g} seconds"
        return await _failure(call, emitter, "Timeout", text, started)
    if isinstance(rendered, _Failure):
        return await _failure(call, emitter, rendered.error_type, rendered.text, started)
    if edited:
        rendered = replace(rendered, text=edited_note(arguments) + rendered.text)
    end = None
    if emitter.wants_events:  # nobody reads the end event otherwise: it is not built
        duration = time.perf_counter() - started
        end = ToolCallEndEvent(call.id, call.name, rendered.text, True, duration)
        await emitter.event(end)
    return _Outcome(_mutation(call, rendered), True, end)


async def _invoke(
    run: RunContext, tool: Tool, call: ToolCall, arguments: dict[str, Any]
) -> RenderedResult | _Failure:
    """Run the tool and render its result; a tool failure becomes a :class:`_Failure`."""
    try:
        token = enter_tool_call(call.id)  # sub-runs it starts name this call as their parent
        try:
            context = (
                None if _reads_no_context(tool) else _context(tool, call, run.emitter, run.abort)
            )
            raw = await tool.invoke(arguments, context)
        finally:
            leave_tool_call(token)
        value = tool.render(raw)
        short = _short(run.invocation, tool, value)
        return short if short is not None else await _render(run.invocation, tool, value)
    except Exception as exc:  # boundary: a tool failure becomes a result the model sees
        return _Failure(type(exc).__name__, render_error(exc))
    except anyio.get_cancelled_exc_class() as exc:
        if being_cancelled():
            raise  # ours (abort, timeout) or the caller's: the batch handles it
        # A stray CancelledError (the tool awaited a future something else cancelled): a
        # failure of this tool, which must not cancel its siblings or end the run.
        return _Failure("CancelledError", render_error(exc) + _STRAY_NOTE)


async def _stepped(
    slot: StepSlot | None,
    emitter: Emitter,
    call: ToolCall,
    invoke: Callable[[], Awaitable[RenderedResult | _Failure]],
) -> RenderedResult | _Failure:
    """The call as a durable step when the run has a step runner (else just ``invoke()``)."""
    try:
        return await run_in_slot(slot, emitter, "tool", call.name, invoke)
    except StepInterruptedError as exc:
        return _Failure("Interrupted", f"Error: {exc}")


_STRAY_NOTE = " (the tool was cancelled by something other than this run)"


def _context(
    tool: Tool, call: ToolCall, emitter: Emitter, abort: AbortSignal | None
) -> ToolContext:
    live = emitter.wants_events
    sink = emitter.custom if live else _discard
    events = ToolEventEmitter(tool_name=tool.name, tool_call_id=call.id, sink=sink, live=live)
    return ToolContext(call.id, tool.name, events, abort)


def _reads_no_context(tool: Tool) -> bool:
    """Whether ``tool.invoke`` would not read a context: the base ``invoke`` of a tool that
    injects no framework parameter (then none is built for it)."""
    return type(tool).invoke is Tool.invoke and not tool.schema.injected


async def _discard(_event: Any) -> None:
    return None


def _short(invocation: Invocation, tool: Tool, value: Any) -> RenderedResult | None:
    """The rendered ``value`` as it is when it is short text, else ``None``.

    Fewer characters than budget tokens is under budget whatever the tokenizer: there is
    nothing to count, read or spill, so the text goes out as it is (no thread, no await).
    """
    budget = tool.result_budget or invocation.options.tool_result_budget
    if isinstance(value, str) and len(value) < budget:
        return RenderedResult(value)
    return None


async def _render(invocation: Invocation, tool: Tool, value: Any) -> RenderedResult:
    """Render a long or non-text result in a worker thread (counting tokens, spilling)."""
    budget = tool.result_budget or invocation.options.tool_result_budget
    options: dict[str, Any] = {
        "budget_tokens": budget,
        "too_long_to_file": tool.too_long_to_file,
        "tool_name": tool.name,
        "model": invocation.llm.model_name,
    }
    return await anyio.to_thread.run_sync(lambda: render_result(value, **options))


def _mutation(call: ToolCall, rendered: RenderedResult) -> ContextMutation:
    if not rendered.images:
        return ToolResultMutation(call.id, rendered.text)
    parts: list[Mapping[str, Any]] = [{"type": "text", "text": rendered.text}]
    parts.extend(image.to_part() for image in rendered.images)
    return MultimodalToolResultMutation(
        call.id, call.name, call.arguments, [{"role": "user", "content": parts}]
    )


async def _failure(
    call: ToolCall, emitter: Emitter, error_type: str, text: str, started: float
) -> _Outcome:
    end = None
    if emitter.wants_events:
        await emitter.event(ToolCallErrorEvent(call.id, call.name, error_type, text))
        end = ToolCallEndEvent(call.id, call.name, text, False, time.perf_counter() - started)
        await emitter.event(end)
    return _Outcome(ToolResultMutation(call.id, text), False, end)
