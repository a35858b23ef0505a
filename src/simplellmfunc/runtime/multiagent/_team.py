"""What every multi-agent pattern shares: run it (``await team.run(...)``) or stream its events
(``async for item in team.stream(...)``), and one agent turn as a sub-run of the team's run.

A team's run has a root origin of its own; each agent turn is a sub-run whose events carry the
agent's name (``origin.agent``) and depth 1 (``origin.fork_depth``), the root's call id as
their parent. Without ``stream`` nothing is emitted and no task is started.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..._abort import AbortSignal, PauseSignal
from ..._events import EventOrigin, EventYield
from ..._mutations import ContextMutation
from ..._usage import Usage
from ...decorators import ChatAgent, agent_run
from ...engine import Emitter, Finished, RunResult, event_pump, new_call_id
from ...exceptions import TeamMemberError, UserError
from ...tools import Tool

__all__ = ["Agent", "Member", "Team", "member_failed", "members", "play_turn"]

Agent = ChatAgent
"""An ``@llm_chat`` agent."""

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Member:
    """An agent of a team and the name it goes by (unique within the team)."""

    name: str
    agent: Agent


def members(agents: Sequence[Agent] | dict[str, Agent]) -> tuple[Member, ...]:
    """The team's members: a list (named after their functions) or a ``{name: agent}`` dict.

    Raises:
        UserError: If a name repeats, no agent is given, or one is not an ``@llm_chat`` agent.
    """
    pairs = list(agents.items()) if isinstance(agents, dict) else [(_name(a), a) for a in agents]
    if not pairs:
        raise UserError("a team needs at least one agent")
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UserError(f"agent names must be unique in a team, got {names} (pass a dict)")
    for name, agent in pairs:
        if not isinstance(agent, ChatAgent):
            raise UserError(f"{name!r} is not an @llm_chat agent")
    return tuple(Member(name, agent) for name, agent in pairs)


def _name(agent: object) -> str:
    """An agent's name; what is no agent is named by its repr (:func:`members` refuses it)."""
    return agent.name if isinstance(agent, ChatAgent) else repr(agent)


class Team(ABC, Generic[R]):
    """A multi-agent pattern: :meth:`run` for the result, :meth:`stream` for events too."""

    async def run(
        self,
        message: str,
        *,
        history: list[dict[str, Any]] | None = None,
        abort: AbortSignal | None = None,
    ) -> R:
        """Play the team on ``message`` and return its result (nothing is emitted).

        Args:
            message: The user's message.
            history: The conversation so far (a previous result's ``history``): the team goes
                on from it.
            abort: Aborts every agent.
        """
        root = Emitter(None, EventOrigin(agent_call_id=new_call_id()), wants_events=False)
        return await self._play(message, root, abort, history or [])

    async def stream(
        self,
        message: str,
        *,
        history: list[dict[str, Any]] | None = None,
        abort: AbortSignal | None = None,
    ) -> AsyncIterator[EventYield | R]:
        """Play the team on ``message`` (after ``history``, as :meth:`run`): every agent's
        events as they happen (``origin.agent`` says whose), then the result."""

        async def body(send: Callable[[Any], Any]) -> R:
            return await self.drive(send, message, history=history, abort=abort)

        pump = event_pump(body)
        try:
            async for item in pump:
                yield item.value if isinstance(item, Finished) else item
        finally:
            await pump.aclose()

    async def drive(
        self,
        send: Callable[[Any], Awaitable[Any]],
        message: str,
        *,
        history: list[dict[str, Any]] | None = None,
        abort: AbortSignal | None = None,
    ) -> R:
        """Play the team on ``message`` (after ``history``) in the caller's task, awaiting
        ``send`` with every agent's events as they happen, and return the result: what
        :meth:`stream` runs in its pump, for a caller that has a pump already (a session
        store's turn), so that the events cross one pump, not two."""
        emitter = Emitter(send, EventOrigin(agent_call_id=new_call_id()), wants_events=True)
        return await self._play(message, emitter, abort, history or [])

    @abstractmethod
    async def _play(
        self,
        message: str,
        root: Emitter,
        abort: AbortSignal | None,
        history: list[dict[str, Any]],
    ) -> R:
        """Run the pattern after ``history``; agent turns stream into ``root``."""


async def play_turn(
    member: Member,
    root: Emitter,
    abort: AbortSignal | None,
    *args: object,
    history: list[dict[str, Any]] | None = None,
    resume: bool = False,
    tools: Sequence[Tool] = (),
    pause: PauseSignal | None = None,
    prelude: Sequence[ContextMutation] = (),
) -> RunResult:
    """One turn of ``member``: a sub-run of the team's run, driven to its end; ``prelude``
    mutations are applied to its transcript first.

    Raises:
        TeamMemberError: When the turn fails for any reason but misuse (its model, a bug in its
            code): the original exception is its cause, ``usage`` the turn's calls so far and
            ``history`` empty (the team fills in the conversation, see :func:`member_failed`).
        UserError: For a misused agent.
    """
    run = await agent_run(
        member.agent,
        *args,
        under=root,
        name=member.name,
        abort=abort,
        history=history,
        resume=resume,
        tools=tools,
        pause=pause,
    )
    run.state.transcript.apply_all(prelude)
    try:
        await run.run_to_end()
    except UserError:
        raise
    except Exception as exc:  # boundary: a member's failure, typed, with its billed calls
        message = f"agent {member.name!r} failed: {type(exc).__name__}: {exc}"
        raise TeamMemberError(
            message, agent=member.name, history=[], usage=run.state.usage
        ) from exc
    return run.state.result()


def member_failed(
    error: TeamMemberError, history: list[dict[str, Any]], usage: Usage
) -> TeamMemberError:
    """``error`` (from :func:`play_turn`) with the team's conversation so far and the usage of
    the team's earlier calls added to the failed turn's."""
    return TeamMemberError(
        str(error), agent=error.agent, history=history, usage=usage + error.usage
    )
