"""Parallel: agents run concurrently on the same or different inputs; results gathered.

Structured concurrency: every agent runs in one task group under a concurrency limit; a failing
agent (or one past its timeout) is reported in its :class:`AgentOutcome` and never stops or
hangs the others; an abort aborts them all, and cancelling the caller cancels them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from ..._abort import AbortSignal
from ..._usage import Usage
from ...engine import Emitter
from ...exceptions import TeamMemberError, UserError
from ._team import Agent, Member, Team, members, play_turn

__all__ = ["AgentOutcome", "Parallel", "ParallelResult"]


@dataclass(frozen=True, slots=True)
class AgentOutcome:
    """One agent's part of a parallel run.

    Attributes:
        agent: The agent's name.
        input: What it was given.
        text: Its answer (``""`` when it failed).
        error: Why it failed (``None`` when it did not): ``"<ErrorType>: message"``.
        terminated_by: How its run ended (``error`` / ``timeout`` for failures).
        usage: Its tokens.
    """

    agent: str
    input: str
    text: str
    error: str | None
    terminated_by: str
    usage: Usage

    @property
    def ok(self) -> bool:
        """Whether the agent answered."""
        return self.error is None and self.terminated_by != "aborted"


@dataclass(frozen=True, slots=True)
class ParallelResult:
    """Every agent's outcome, in the order they were given."""

    outcomes: tuple[AgentOutcome, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        """The answers, in order (``""`` for failures)."""
        return tuple(o.text for o in self.outcomes)

    @property
    def failed(self) -> tuple[AgentOutcome, ...]:
        """The outcomes of agents that did not answer."""
        return tuple(o for o in self.outcomes if not o.ok)

    @property
    def usage(self) -> Usage:
        """Tokens of every agent."""
        total = Usage()
        for outcome in self.outcomes:
            total = total + outcome.usage
        return total


class Parallel(Team[ParallelResult]):
    """Agents run at once: ``run(message)`` gives every agent the same input;
    ``inputs=[...]`` gives agent *i* input *i* instead (then ``run()`` takes no message).

    Args:
        agents: ``@llm_chat`` agents or ``{name: agent}``.
        inputs: One input per agent (optional).
        limit: Most agents running at once (``None``: all).
        timeout: Seconds each agent may take (``None``: no limit).

    Raises:
        UserError: For no agents, clashing names, inputs of the wrong length or a bad limit.
    """

    def __init__(
        self,
        agents: Sequence[Agent] | dict[str, Agent],
        *,
        inputs: Sequence[str] | None = None,
        limit: int | None = None,
        timeout: float | None = None,
    ) -> None:
        self._members = members(agents)
        if inputs is not None and len(inputs) != len(self._members):
            raise UserError(f"{len(self._members)} agents need {len(self._members)} inputs")
        if limit is not None and limit < 1:
            raise UserError("limit must be at least 1")
        self.inputs = tuple(inputs) if inputs is not None else None
        self.limit = limit
        self.timeout = timeout

    def __or__(self, other: Parallel | Agent) -> Parallel:
        """``a | b``: one flat :class:`Parallel` of both sides' agents (the seed's ``AsyncPar``
        flattening); ``other`` may be a single agent. A limit is the sum of both (``None`` if
        either has none), a timeout the longer of the two.

        Raises:
            UserError: If either side has per-agent ``inputs``, or two agents share a name.
        """
        right = other if isinstance(other, Parallel) else Parallel([other])
        if self.inputs is not None or right.inputs is not None:
            raise UserError("Parallel with per-agent inputs cannot be combined with |")
        both = {m.name: m.agent for m in self._members}
        for member in right._members:
            if member.name in both:
                raise UserError(f"agent names must be unique in a team: {member.name!r} is in both")
            both[member.name] = member.agent
        limit = None if self.limit is None or right.limit is None else self.limit + right.limit
        timeout = (
            None
            if self.timeout is None or right.timeout is None
            else max(self.timeout, right.timeout)
        )
        return Parallel(both, limit=limit, timeout=timeout)

    async def run(
        self,
        message: str = "",
        *,
        history: list[dict[str, Any]] | None = None,
        abort: AbortSignal | None = None,
    ) -> ParallelResult:
        """Run every agent (on ``message``, or on its own input, each after ``history``) and
        gather the outcomes."""
        return await super().run(message, history=history, abort=abort)

    async def _play(
        self,
        message: str,
        root: Emitter,
        abort: AbortSignal | None,
        history: list[dict[str, Any]],
    ) -> ParallelResult:
        inputs = self.inputs or tuple(message for _ in self._members)
        outcomes: list[AgentOutcome | None] = [None] * len(self._members)
        limiter = anyio.CapacityLimiter(self.limit or len(self._members))

        async def one(index: int, member: Member, text: str) -> None:
            async with limiter:
                outcomes[index] = await _outcome(member, root, abort, text, history, self.timeout)

        async with anyio.create_task_group() as group:
            for index, (member, text) in enumerate(zip(self._members, inputs, strict=True)):
                group.start_soon(one, index, member, text)
        return ParallelResult(tuple(o for o in outcomes if o is not None))


async def _outcome(
    member: Member,
    root: Emitter,
    abort: AbortSignal | None,
    text: str,
    history: list[dict[str, Any]],
    timeout: float | None,
) -> AgentOutcome:
    """Run one agent; its failure becomes its outcome."""
    if abort is not None and abort.aborted:
        return AgentOutcome(member.name, text, "", None, "aborted", Usage())
    with anyio.move_on_after(timeout) as scope:
        try:
            result = await play_turn(member, root, abort, text, history=history)
        except TeamMemberError as exc:  # one agent's failure is its outcome, with its billed calls
            cause = exc.__cause__ or exc
            error = f"{type(cause).__name__}: {cause}"
            return AgentOutcome(member.name, text, "", error, "error", exc.usage)
        return AgentOutcome(
            member.name, text, result.text, None, result.terminated_by, result.usage
        )
    assert scope.cancelled_caught
    error = f"TimeoutError: no answer within {timeout:g} seconds"
    return AgentOutcome(member.name, text, "", error, "timeout", Usage())
