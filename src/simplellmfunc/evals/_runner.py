"""Running a dataset: every case ``repeats`` times, at most ``concurrency`` calls at once."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any

import anyio

from .._events import (
    EventYield,
    ReactEndEvent,
    ResponseYield,
    ToolCallStartEvent,
)
from .._messages import history_to_dicts
from .._usage import Usage
from ..decorators import ChatAgent, LLMFunction
from ..engine import RunResult
from ..exceptions import UserError
from ._case import Case, Dataset, Evaluator, Outcome, Score, ToolCallRecord
from ._report import Attempt, CaseResult, Report

__all__ = ["call_target", "evaluate"]

Target = LLMFunction[Any, Any] | ChatAgent | Callable[..., Awaitable[Any]]


async def call_target(target: Target, inputs: Mapping[str, Any]) -> Outcome:
    """Call ``target`` with ``inputs`` (keyword arguments) and gather what it produced.

    An ``@llm_function`` gives its parsed value, an ``@llm_chat`` agent its answer text; both
    give their tool calls, usage and history (from their events). Any other async callable
    gives its return value only. An exception becomes the outcome's ``error``.
    """
    start = time.perf_counter()
    calls: list[ToolCallRecord] = []
    usage = Usage()
    output: Any = None
    messages: tuple[Mapping[str, Any], ...] = ()

    def see(item: object) -> None:
        nonlocal usage
        if not isinstance(item, EventYield) or item.origin.fork_depth != 0:
            return
        event = item.event
        if isinstance(event, ToolCallStartEvent):
            calls.append(ToolCallRecord(event.tool_name, dict(event.arguments)))
        elif isinstance(event, ReactEndEvent):
            usage = event.total_usage

    try:
        if isinstance(target, LLMFunction):
            stream = target.events(**inputs)
            async with aclosing(stream) as items:
                async for item in items:
                    see(item)
                    if isinstance(item, ResponseYield):
                        output, messages = item.response, tuple(item.messages)
        elif isinstance(target, ChatAgent):
            run = await target.run(**inputs)
            async with aclosing(run.__aiter__()) as items:
                async for item in items:
                    see(item)
                    if isinstance(item, RunResult):
                        output = item.text
                        usage = item.usage
                        messages = tuple(history_to_dicts(item.messages))
        else:
            output = await target(**inputs)
    except Exception as exc:  # boundary: a failing case is a result, not the end of the run
        return Outcome(
            None,
            tuple(calls),
            usage,
            time.perf_counter() - start,
            f"{type(exc).__name__}: {exc}"[:1000],
        )
    return Outcome(output, tuple(calls), usage, time.perf_counter() - start, None, messages)


async def _score(evaluator: Evaluator, case: Case, outcome: Outcome) -> Score:
    name = getattr(evaluator, "name", type(evaluator).__name__)
    if outcome.error is not None:
        return Score(name, False, 0.0, f"the call failed: {outcome.error}")
    try:
        return await evaluator.evaluate(case, outcome)
    except Exception as exc:  # boundary: a broken evaluator fails its score, not the run
        return Score(name, False, 0.0, f"evaluator raised {type(exc).__name__}: {exc}"[:500])


async def evaluate(
    target: Target,
    dataset: Dataset,
    *,
    evaluators: Sequence[Evaluator] = (),
    concurrency: int = 8,
    repeats: int = 1,
    timeout: float | None = None,
    name: str | None = None,
) -> Report:
    """Run every case of ``dataset`` ``repeats`` times through ``target`` and score each
    attempt with the dataset's evaluators, then ``evaluators``, then the case's own.

    Args:
        target: An ``@llm_function``, an ``@llm_chat`` agent or any async callable; a case's
            ``inputs`` are its keyword arguments.
        concurrency: At most this many calls run at once.
        repeats: Attempts per case (a case passes at k when one of its k attempts passes
            every evaluator; see :class:`Report`).
        timeout: Seconds per attempt; a slower attempt fails with ``TimeoutError``.
        name: The report's name (the target's name by default).

    Raises:
        UserError: When ``concurrency`` or ``repeats`` is below 1.
    """
    if concurrency < 1 or repeats < 1:
        raise UserError("evaluate() needs concurrency >= 1 and repeats >= 1")
    limiter = anyio.CapacityLimiter(concurrency)
    results: dict[tuple[int, int], Attempt] = {}
    started = time.perf_counter()

    async def attempt(index: int, number: int) -> None:
        case = dataset.cases[index]
        async with limiter:
            if timeout is None:
                outcome = await call_target(target, case.inputs)
            else:
                outcome = Outcome(None, error=f"TimeoutError: over {timeout}s", duration_s=timeout)
                with anyio.move_on_after(timeout):
                    outcome = await call_target(target, case.inputs)
        scores = [
            await _score(evaluator, case, outcome)
            for evaluator in (*dataset.evaluators, *evaluators, *case.evaluators)
        ]
        results[index, number] = Attempt.of(outcome, scores)

    async with anyio.create_task_group() as group:
        for index in range(len(dataset.cases)):
            for number in range(repeats):
                group.start_soon(attempt, index, number)
    cases = [
        CaseResult(
            case.name,
            dict(case.inputs),
            case.expected,
            dict(case.metadata),
            tuple(results[index, n] for n in range(repeats)),
        )
        for index, case in enumerate(dataset.cases)
    ]
    label = name or str(getattr(target, "__name__", type(target).__name__))
    return Report(label, dataset.name, repeats, time.perf_counter() - started, tuple(cases))
