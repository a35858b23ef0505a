"""Multi-agent configs: a ``group`` agent's chat, and a react agent with ``handoffs:``.

Members are other config files, each opened as its own agent (model, tools, memory); the team
they form (``multiagent.GroupChat`` / ``multiagent.Handoff``) is wrapped as a chat function
of the same shape as a single agent's, so turns, observers and the trace work unchanged: every
member's events are in the one stream, tagged with the member's name.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from ..._abort import AbortSignal
from ..._events import EventYield, ResponseYield
from ...providers import LLMInterface
from ..multiagent import GroupChat, GroupChatResult, Handoff, HandoffResult, LLMSelector, Team
from ._schema import AgentConfig

__all__ = ["group_chat", "handoff_chat"]

ChatFunction = Callable[..., AsyncIterator[Any]]


def group_chat(
    config: AgentConfig, members: Mapping[str, ChatFunction], llm: LLMInterface
) -> ChatFunction:
    """The chat function of a ``group`` agent over its opened ``members``."""
    settings = config.group
    speaker: Any = LLMSelector(llm) if settings.speaker == "llm" else "round_robin"
    team = GroupChat(
        dict(members),
        speaker=speaker,
        max_rounds=settings.max_rounds,
        stop_keywords=settings.stop_keywords,
    )
    return _as_chat(team)


def handoff_chat(
    entry_name: str, entry: ChatFunction, targets: Mapping[str, ChatFunction]
) -> ChatFunction:
    """The chat function of an agent that may hand off to ``targets`` (and they back to it)."""
    names = {entry_name: entry, **targets}
    routes: dict[Any, list[Any]] = {entry_name: list(targets.values())}
    for name in targets:
        routes[name] = [entry]
    return _as_chat(Handoff(entry, routes, names=names))


def _as_chat(team: Team[Any]) -> ChatFunction:
    async def chat(
        message: str,
        history: list[dict[str, Any]] | None = None,
        _abort_signal: AbortSignal | None = None,
        **_call_options: Any,  # _session_id ...: a team's members take their own
    ) -> AsyncIterator[Any]:
        async for item in team.stream(message, abort=_abort_signal):
            if isinstance(item, EventYield):
                yield item
            else:
                yield ResponseYield(item.text, _history(item, message))

    return chat


def _history(result: Any, message: str) -> list[dict[str, Any]]:
    if isinstance(result, HandoffResult):
        return result.history
    assert isinstance(result, GroupChatResult)
    return [{"role": "user", "content": message}] + [
        {"role": "assistant", "name": m.speaker, "content": m.text} for m in result.messages[1:]
    ]
