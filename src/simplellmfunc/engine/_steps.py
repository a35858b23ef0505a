"""The seam a durable-execution engine uses: the loop's side effects run as recorded steps.

The loop has two kinds of side effects, LLM calls and tool calls. When a :class:`StepRunner` is
active (:func:`running_steps`, set by ``simplellmfunc.runtime.durable`` around a workflow), each
one runs through a :class:`StepSlot`: the runner records its result, and a run re-executed after
a crash gets the recorded result back instead of calling the provider or the tool again.

Slots are taken synchronously, in the order the loop reaches the calls (the calls of one tool
batch before any of them starts), so a re-executed run asks for the same steps in the same order.
Without a runner the loop calls the provider and the tools directly and pays nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, Protocol, TypeVar

from .._events import CustomEvent
from ._emit import Emitter

__all__ = [
    "STEP_REPLAYED",
    "StepKind",
    "StepRunner",
    "StepSlot",
    "current_step_runner",
    "run_in_slot",
    "running_steps",
]

T = TypeVar("T")

StepKind = Literal["llm", "tool"]

STEP_REPLAYED = "step_replayed"
"""The ``event_name`` of the ``CustomEvent`` telling that a step's result came from the record."""


class StepSlot(Protocol):
    """One reserved step of a run."""

    async def run(self, func: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """Run ``func`` as the step, or return its recorded result.

        Returns:
            The result and whether it was replayed from the record (``func`` was not called).

        Raises:
            StepInterruptedError: For a non-idempotent tool call that began before a crash.
        """
        ...


class StepRunner(Protocol):
    """Hands out step slots, in the order the loop asks for them."""

    def slot(
        self, kind: StepKind, name: str, *, idempotent: bool = True, approval_id: str | None = None
    ) -> StepSlot:
        """Reserve the next step (called synchronously, in a deterministic order).

        ``approval_id`` is the call id of a tool call that may wait for approval (its tool or
        the run's policy may ask): a runner that records the wait reserves a step for it too.
        """
        ...


_CURRENT: ContextVar[StepRunner | None] = ContextVar("simplellmfunc_step_runner", default=None)


def current_step_runner() -> StepRunner | None:
    """The step runner of the current context (``None``: side effects run directly)."""
    return _CURRENT.get()


@contextmanager
def running_steps(runner: StepRunner | None) -> Iterator[None]:
    """Make ``runner`` the step runner of runs created inside the block (``None``: none)."""
    token = _CURRENT.set(runner)
    try:
        yield
    finally:
        _CURRENT.reset(token)


async def run_in_slot(
    slot: StepSlot | None,
    emitter: Emitter,
    kind: StepKind,
    name: str,
    func: Callable[[], Awaitable[T]],
) -> T:
    """``await func()``, as the step ``slot`` when there is one.

    A replayed step is reported with a ``CustomEvent`` named :data:`STEP_REPLAYED`.
    """
    if slot is None:
        return await func()
    value, replayed = await slot.run(func)
    if replayed and emitter.wants_events:
        await emitter.event(CustomEvent(STEP_REPLAYED, {"kind": kind, "name": name}))
    return value
