"""Multi-agent configs: a ``group`` agent's chat, a ``parallel`` agent's fan-out, and a react
agent with ``handoffs:``.

Members are other config files, each opened as its own agent (model, tools, memory); the team
they form (``multiagent.GroupChat`` / ``Parallel`` / ``Handoff``) is wrapped as a chat function
of the same shape as a single agent's, so turns, observers, sessions and the trace work
unchanged: every member's events are in the one stream, tagged with the member's name, and the
conversation a turn ends with is the one the next turn goes on from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ..._abort import AbortSignal
from ..._events import EventYield, ResponseYield
from ...decorators import ChatAgent
from ...providers import LLMInterface
from ..multiagent import (
    GroupChat,
    GroupChatResult,
    Handoff,
    HandoffResult,
    LLMSelector,
    Parallel,
    ParallelResult,
    Team,
)
from ._schema import AgentConfig

__all__ = ["TeamChat", "TeamTurn", "group_chat", "handoff_chat", "parallel_chat"]

ChatFunction = Callable[..., AsyncIterator[Any]]


def group_chat(
    config: AgentConfig, members: Mapping[str, ChatAgent], llm: LLMInterface
) -> ChatFunction:
    """The chat function of a ``group`` agent over its opened ``members``."""
    settings = config.group
    speaker: Any = LLMSelector(llm) if settings.speaker == "llm" else settings.speaker
    team = GroupChat(
        dict(members),
        speaker=speaker,
        max_rounds=settings.max_rounds,
        stop_keywords=settings.stop_keywords,
    )
    return _as_chat(team)


def parallel_chat(config: AgentConfig, members: Mapping[str, ChatAgent]) -> ChatFunction:
    """The chat function of a ``parallel`` agent: every member answers the message (after the
    conversation so far); the answer is theirs, one paragraph each."""
    settings = config.parallel
    return _as_chat(Parallel(dict(members), limit=settings.limit, timeout=settings.timeout))


def handoff_chat(
    entry: str,
    agents: Mapping[str, ChatAgent],
    routes: Mapping[str, list[str]],
    max_handoffs: int = 5,
) -> ChatFunction:
    """The chat function of a handoff graph: ``entry`` gets the first message, ``routes``
    says who may hand off to whom (by name, among ``agents``), at most ``max_handoffs`` times
    in one run."""
    graph: dict[ChatAgent | str, list[ChatAgent]] = {
        s: [agents[t] for t in ts] for s, ts in routes.items()
    }
    handoff = Handoff(agents[entry], graph, names=dict(agents), max_handoffs=max_handoffs)
    return _as_chat(handoff)


def _as_chat(team: Team[Any]) -> ChatFunction:
    return TeamChat(team)


class TeamChat:
    """A team as a chat function of a single agent's shape (its events, then a
    ``ResponseYield``), and as a turn a session store drives in its own task
    (:meth:`turn`)."""

    def __init__(self, team: Team[Any]) -> None:
        self.team = team

    async def __call__(
        self,
        message: str,
        history: list[dict[str, Any]] | None = None,
        _abort_signal: AbortSignal | None = None,
        **_call_options: object,  # _session_id ...: a team's members take their own
    ) -> AsyncIterator[Any]:
        previous = list(history or [])
        async for item in self.team.stream(message, history=previous, abort=_abort_signal):
            if isinstance(item, EventYield):
                yield item
            else:
                yield ResponseYield(_text(item), _history(item, previous, message))

    def turn(
        self,
        message: str,
        history: list[dict[str, Any]] | None,
        abort: AbortSignal | None,
        record: Callable[[Any], Awaitable[Any]],
    ) -> TeamTurn:
        """One turn for a caller that drives it (see :class:`TeamTurn`); ``record`` sees
        every event first (the trace recorder)."""
        return TeamTurn(self.team, message, list(history or []), abort, record)


class TeamTurn:
    """One turn of a team, driven in the caller's task: :meth:`drive` plays the team with its
    events going to the caller's sink (one pump, the caller's, not the team's own inside it)
    and returns the ``ResponseYield``."""

    def __init__(
        self,
        team: Team[Any],
        message: str,
        history: list[dict[str, Any]],
        abort: AbortSignal | None,
        record: Callable[[Any], Awaitable[Any]],
    ) -> None:
        self._team, self._message, self._history = team, message, history
        self._abort, self._record = abort, record

    async def drive(self, send: Callable[[Any], Awaitable[Any]]) -> ResponseYield:
        async def sink(item: Any) -> None:
            if isinstance(item, EventYield):
                await self._record(item)
                await send(item)

        result = await self._team.drive(
            sink, self._message, history=self._history, abort=self._abort
        )
        return ResponseYield(_text(result), _history(result, self._history, self._message))


def _text(result: Any) -> str:
    if not isinstance(result, ParallelResult):
        return str(result.text)
    return "\n\n".join(
        f"[{o.agent}] {o.text}" if o.ok else f"[{o.agent}] failed: {o.error or o.terminated_by}"
        for o in result.outcomes
    )


def _history(result: object, previous: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
    if isinstance(result, HandoffResult | GroupChatResult):
        return result.history
    turn = [{"role": "user", "content": message}, {"role": "assistant", "content": _text(result)}]
    return [*previous, *turn]
