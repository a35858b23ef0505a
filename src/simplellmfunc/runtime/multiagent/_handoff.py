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

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._abort import AbortSignal, PauseSignal
from ..._messages import history_to_dicts
from ..._mutations import UserMessageMutation
from ..._usage import Usage
from ...engine import Emitter, RunResult, current_run
from ...exceptions import TeamMemberError, UserError
from ...tools import Tool, ToolContext
from ._team import Agent, Member, Team, _name, member_failed, members, play_turn

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
        fallback: The agent that goes on when a history names an agent that is not (or no
            longer) in the graph and no name is close enough (default: the entry agent).

    The graph can change between runs (the seed's dynamic routing table, §17.4):
    :meth:`register` adds an agent and its routes, :meth:`unregister` removes one. Agent names
    given as text (routes, :meth:`resolve`, the name on a history's last answer) match exactly,
    then ignoring case and punctuation, then by closest spelling.

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
        fallback: Agent | None = None,
    ) -> None:
        if max_handoffs < 0:
            raise UserError("max_handoffs must be 0 or more")
        named = {id(agent): name for name, agent in (names or {}).items()}

        def name_of(agent: Agent) -> str:
            return named.get(id(agent)) or _name(agent)

        agents: dict[str, Agent] = {name_of(entry): entry}
        if fallback is not None:
            agents.setdefault(name_of(fallback), fallback)
        for source, targets in routes.items():
            if not isinstance(source, str):
                agents.setdefault(name_of(source), source)
            for target in targets:
                agents.setdefault(name_of(target), target)
        self._members = {m.name: m for m in members(agents)}
        self._routes: dict[str, tuple[str, ...]] = {}
        for source, targets in routes.items():
            key = self.resolve(source) if isinstance(source, str) else name_of(source)
            if key is None:
                raise UserError(f"handoff route from unknown agent {source!r}")
            self._routes[key] = tuple(name_of(t) for t in targets)
        self._tools: dict[str, tuple[_TransferTool, ...]] = {}
        self._build_tools()
        self.entry = name_of(entry)
        self.fallback = name_of(fallback) if fallback is not None else self.entry
        self.max_handoffs = max_handoffs
        self.input_filter = input_filter

    def resolve(self, name: str) -> str | None:
        """The graph's agent called ``name``: exactly, else ignoring case and punctuation, else
        the closest spelling (``difflib``, ratio 0.75 or more); ``None`` when none is close."""
        if name in self._members:
            return name
        wanted = _simple(name)
        for known in self._members:
            if _simple(known) == wanted:
                return known
        close = difflib.get_close_matches(name, list(self._members), n=1, cutoff=0.75)
        return close[0] if close else None

    def register(
        self,
        agent: Agent,
        *,
        name: str | None = None,
        reachable_from: Sequence[str] = (),
        hands_to: Sequence[str] = (),
    ) -> str:
        """Add ``agent`` to the graph (for the next runs); return its name.

        Args:
            agent: An ``@llm_chat`` agent.
            name: Its name (default: its function's).
            reachable_from: Agents that may hand off to it.
            hands_to: Agents it may hand off to.

        Raises:
            UserError: For a name already in the graph or an unknown agent name.
        """
        (member,) = members({name: agent} if name else [agent])
        if member.name in self._members:
            raise UserError(f"the handoff graph already has an agent named {member.name!r}")
        sources, targets = self._known(reachable_from), self._known(hands_to)
        self._members[member.name] = member
        for source in sources:
            self._routes[source] = (*self._routes.get(source, ()), member.name)
        if targets:
            self._routes[member.name] = tuple(targets)
        self._build_tools()
        return member.name

    def unregister(self, name: str) -> None:
        """Remove the agent ``name`` and every route to or from it (for the next runs). A
        history that names it goes on with :attr:`fallback`.

        Raises:
            UserError: For an unknown name, the entry agent or the fallback.
        """
        known = self.resolve(name)
        if known is None:
            raise UserError(f"no agent {name!r} in the handoff graph ({', '.join(self.agents)})")
        if known in (self.entry, self.fallback):
            raise UserError(f"{known!r} is the entry or fallback agent: it cannot be removed")
        del self._members[known]
        self._routes.pop(known, None)
        self._routes = {s: tuple(t for t in ts if t != known) for s, ts in self._routes.items()}
        self._build_tools()

    def _known(self, names: Sequence[str]) -> list[str]:
        found = []
        for name in names:
            known = self.resolve(name)
            if known is None:
                raise UserError(
                    f"no agent {name!r} in the handoff graph ({', '.join(self.agents)})"
                )
            found.append(known)
        return found

    def _build_tools(self) -> None:
        self._tools = {
            source: tuple(_TransferTool(source, self._members[t]) for t in targets)
            for source, targets in self._routes.items()
        }

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
        try:
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
        except TeamMemberError as exc:
            so_far = history if len(path) > 1 else [*history, {"role": "user", "content": message}]
            raise member_failed(exc, so_far, usage) from exc.__cause__
        assert result is not None  # the loop runs at least once
        _sign(history, current.name)
        return HandoffResult(
            result.text, current.name, tuple(path), history, usage, result.terminated_by
        )

    def _in_charge(self, history: list[dict[str, Any]]) -> str:
        """Who goes on after ``history``: the agent whose name its last answer carries (see
        :attr:`HandoffResult.history`; matched as :meth:`resolve` does, the fallback when no
        agent is close), else the entry agent."""
        for message in reversed(history):
            if message.get("role") == "assistant" and message.get("content"):
                name = message.get("name")
                if not isinstance(name, str):
                    return self.entry
                return self.resolve(name) or self.fallback
        return self.entry


def _simple(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", name.casefold())


def _sign(history: list[dict[str, Any]], agent: str) -> None:
    """Put ``agent``'s name on the last answer of ``history`` (fresh dicts of this run)."""
    for message in reversed(history):
        if message.get("role") == "assistant":
            message["name"] = agent
            return
