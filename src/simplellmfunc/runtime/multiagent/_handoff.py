"""Handoff: an agent transfers the conversation to another (the OpenAI-agents idea).

Each agent that may hand off gets one ``transfer_to_<name>`` tool per target for its turn.
Calling one ends the turn at its next safe point (every tool call answered; the run ends
``paused``), and the target continues the conversation: its own system prompt, the history so
far passed through ``input_filter``, and a user note saying who handed over and why (a
``UserMessageMutation``). A ``handoff`` custom event marks the transfer in the stream and the
trace. Handoffs are bounded: after ``max_handoffs`` the agent in charge gets no transfer tools
and has to answer. Run after a history (``run(message, history=result.history)``), the agent
that answered last goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._abort import AbortSignal, PauseSignal
from ..._messages import history_to_dicts
from ..._mutations import UserMessageMutation
from ..._usage import Usage
from ...engine import Emitter, RunResult, current_run
from ...exceptions import UserError
from ...tools import Tool, ToolContext
from ._team import Agent, Member, Team, _name, members, play_turn

__all__ = ["Handoff", "HandoffResult", "InputFilter", "drop_tool_turns"]

InputFilter = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
"""Turns the history handed over (chat dicts, system prompt first) into what the target sees."""


@dataclass(frozen=True, slots=True)
class HandoffResult:
    """How a handoff run ended.

    Attributes:
        text: The answer.
        agent: The name of the agent that answered.
        path: Every agent in charge, in order (the first got the message).
        history: The answering agent's conversation (its system prompt first), valid for a
            next call; its last answer carries the agent's ``name``, so that a next
            ``run(history=...)`` goes on with that agent.
        usage: Tokens of every agent's calls.
        terminated_by: How the answering agent's run ended.
    """

    text: str
    agent: str
    path: tuple[str, ...]
    history: list[dict[str, Any]]
    usage: Usage
    terminated_by: str


def drop_tool_turns(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An input filter: the history without tool calls and tool results (assistant text kept)."""
    kept: list[dict[str, Any]] = []
    for message in history:
        if message.get("role") == "tool":
            continue
        if message.get("role") == "assistant" and message.get("tool_calls"):
            if message.get("content"):
                kept.append({"role": "assistant", "content": message["content"]})
            continue
        kept.append(message)
    return kept


class _Request(PauseSignal):
    """The pause signal of one agent's turn, and the transfer that set it."""

    __slots__ = ("reason", "target")

    def __init__(self) -> None:
        super().__init__()
        self.target: str | None = None
        self.reason = ""


class _TransferTool(Tool):
    """Hands the conversation to another agent (built once per route; the turn it ends is the
    current run's, whose pause signal is its :class:`_Request`)."""

    def __init__(self, source: str, target: Member) -> None:
        self._source, self._target = source, target.name
        doc = target.agent.description
        about = f" ({doc})" if doc else ""
        super().__init__(
            f"transfer_to_{target.name}",
            f"Hand the conversation over to the agent {target.name!r}{about}; it answers "
            "the user from here on.",
        )

    async def run(self, reason: str = "") -> str:
        """Hand over.

        Args:
            reason: Why, in one sentence, for the next agent.
        """
        return await self.invoke({"reason": reason})

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        """Record the transfer (the first of a batch wins) and end the turn.

        Raises:
            UserError: If called outside a handoff run.
        """
        run = current_run()
        request = run.pause if run is not None else None
        if not isinstance(request, _Request):
            raise UserError(f"{self.name} works only inside a Handoff run")
        if request.target is None:
            request.target, request.reason = self._target, str(arguments.get("reason") or "")
            request.pause()
            if context is not None:
                data = {"from": self._source, "to": self._target, "reason": request.reason}
                await context.event_emitter.emit("handoff", data)
        return f"Transferred to {self._target}."


class Handoff(Team[HandoffResult]):
    """Agents that hand the conversation to each other; ``entry`` starts.

    Args:
        entry: The agent that gets the user's message.
        routes: Who may hand off to whom: ``{agent or name: [targets]}``. Agents are
            ``@llm_chat`` functions, named after their function (use ``names`` to rename).
        max_handoffs: Most transfers in one run.
        input_filter: What of the history a target sees (default: everything;
            :func:`drop_tool_turns` keeps only the text).
        names: Names for agents whose function names clash or say little.

    Raises:
        UserError: For an unknown route name, clashing names or a negative bound.
    """

    def __init__(
        self,
        entry: Agent,
        routes: Mapping[Agent | str, Sequence[Agent]],
        *,
        max_handoffs: int = 5,
        input_filter: InputFilter | None = None,
        names: Mapping[str, Agent] | None = None,
    ) -> None:
        if max_handoffs < 0:
            raise UserError("max_handoffs must be 0 or more")
        named = {id(agent): name for name, agent in (names or {}).items()}

        def name_of(agent: Agent) -> str:
            return named.get(id(agent)) or _name(agent)

        agents: dict[str, Agent] = {name_of(entry): entry}
        for source, targets in routes.items():
            if not isinstance(source, str):
                agents.setdefault(name_of(source), source)
            for target in targets:
                agents.setdefault(name_of(target), target)
        self._members = {m.name: m for m in members(agents)}
        self._routes: dict[str, tuple[str, ...]] = {}
        for source, targets in routes.items():
            key = source if isinstance(source, str) else name_of(source)
            if key not in self._members:
                raise UserError(f"handoff route from unknown agent {key!r}")
            self._routes[key] = tuple(name_of(t) for t in targets)
        self._tools = {
            source: tuple(_TransferTool(source, self._members[t]) for t in targets)
            for source, targets in self._routes.items()
        }
        self.entry = name_of(entry)
        self.max_handoffs = max_handoffs
        self.input_filter = input_filter

    @property
    def agents(self) -> tuple[str, ...]:
        """The names of every agent of the handoff graph."""
        return tuple(self._members)

    async def _play(
        self,
        message: str,
        root: Emitter,
        abort: AbortSignal | None,
        history: list[dict[str, Any]],
    ) -> HandoffResult:
        current = self._members[self._in_charge(history)]
        path, usage, reason = [current.name], Usage(), ""
        result: RunResult | None = None
        for hop in range(self.max_handoffs + 1):
            request = _Request()
            tools = self._tools.get(current.name, ()) if hop < self.max_handoffs else ()
            if hop == 0:
                result = await play_turn(
                    current, root, abort, message, history=history, tools=tools, pause=request
                )
            else:
                note = f"[handoff] {path[-2]} handed the conversation to you ({current.name})"
                note += f": {reason}" if reason else "."
                result = await play_turn(
                    current,
                    root,
                    abort,
                    history=self.input_filter(history) if self.input_filter else history,
                    resume=True,
                    tools=tools,
                    pause=request,
                    prelude=(UserMessageMutation({"role": "user", "content": note}),),
                )
            usage = usage + result.usage
            history = history_to_dicts(result.messages)
            if request.target is None or result.terminated_by != "paused":
                break
            current, reason = self._members[request.target], request.reason
            path.append(current.name)
        assert result is not None  # the loop runs at least once
        _sign(history, current.name)
        return HandoffResult(
            result.text, current.name, tuple(path), history, usage, result.terminated_by
        )

    def _in_charge(self, history: list[dict[str, Any]]) -> str:
        """Who goes on after ``history``: the agent whose name its last answer carries (see
        :attr:`HandoffResult.history`), else the entry agent."""
        for message in reversed(history):
            if message.get("role") == "assistant" and message.get("content"):
                name = message.get("name")
                return name if isinstance(name, str) and name in self._members else self.entry
        return self.entry


def _sign(history: list[dict[str, Any]], agent: str) -> None:
    """Put ``agent``'s name on the last answer of ``history`` (fresh dicts of this run)."""
    for message in reversed(history):
        if message.get("role") == "assistant":
            message["name"] = agent
            return
