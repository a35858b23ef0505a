"""GroupChat: N agents share one conversation, one speaker per round.

Each message of the chat is attributed to its speaker (:class:`GroupMessage`). When an agent
speaks, it sees the chat as a valid two-party history: its own earlier messages as assistant
turns, everything said since its last turn (the task included) as one user turn of
``[speaker]: text`` lines; its tool calls stay in its own run. The next speaker is chosen
round-robin, by a function of the chat so far, or by a model (:class:`LLMSelector`); the chat
ends after ``max_rounds`` messages, on a keyword, or when a predicate says so.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..._abort import AbortSignal
from ..._messages import SystemMessage, UserMessage
from ..._usage import Usage
from ...engine import Emitter
from ...exceptions import TeamMemberError, UserError
from ...providers import LLMInterface, LLMRequest
from ._team import Agent, Member, Team, member_failed, members, play_turn

__all__ = [
    "GroupChat",
    "GroupChatResult",
    "GroupChatState",
    "GroupMessage",
    "LLMSelector",
    "SpeakerSelector",
]


@dataclass(frozen=True, slots=True)
class GroupMessage:
    """One message of a group chat and who said it (``"user"`` for the task)."""

    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class GroupChatState:
    """What a speaker selector and a termination predicate see.

    Attributes:
        messages: The chat so far (the task first; after a ``history``, its messages before).
        agents: The names of the agents, in order.
        round: Rounds played (agent messages so far).
    """

    messages: tuple[GroupMessage, ...]
    agents: tuple[str, ...]
    round: int

    @property
    def last_speaker(self) -> str:
        """Who spoke last (``"user"`` before the first round)."""
        return self.messages[-1].speaker


@dataclass(frozen=True, slots=True)
class GroupChatResult:
    """How a group chat ended.

    Attributes:
        messages: Every message, attributed (the task first; after a ``history``, its messages
            before).
        rounds: Rounds played in this run.
        terminated_by: ``max_rounds``, ``keyword``, ``predicate`` or ``aborted``.
        usage: Tokens of every agent's calls (an :class:`LLMSelector` counts its own in its
            ``usage``).
    """

    messages: tuple[GroupMessage, ...]
    rounds: int
    terminated_by: Literal["max_rounds", "keyword", "predicate", "aborted"]
    usage: Usage

    @property
    def text(self) -> str:
        """The last message's text."""
        return self.messages[-1].text

    @property
    def history(self) -> list[dict[str, Any]]:
        """The chat as chat dicts, for a next ``run(history=...)``: the user's messages as
        ``user`` turns, each agent's as an ``assistant`` turn with its ``name``."""
        return [_as_dict(m) for m in self.messages]


SpeakerSelector = Callable[[GroupChatState], "str | Awaitable[str]"]
"""Picks the next speaker's name from the chat so far (may be async)."""


class LLMSelector:
    """Asks a model who speaks next: the agents' names and descriptions and the recent chat go
    in, a name comes out (the first agent name in the reply; round-robin when there is none).

    Args:
        llm: The model that chooses.
        descriptions: What each agent does (default: its docstring's first line).
        recent: How many recent messages the model sees.
    """

    def __init__(
        self, llm: LLMInterface, descriptions: dict[str, str] | None = None, recent: int = 6
    ) -> None:
        self.llm = llm
        self.descriptions = dict(descriptions or {})
        self.recent = recent
        self.usage = Usage()

    async def __call__(self, state: GroupChatState) -> str:
        """The next speaker's name."""
        roster = "\n".join(
            f"- {n}: {self.descriptions.get(n, '')}".rstrip(": ") for n in state.agents
        )
        chat = "\n".join(f"[{m.speaker}]: {m.text}" for m in state.messages[-self.recent :])
        system = (
            "You choose who speaks next in a group chat. Agents:\n"
            f"{roster}\nReply with the name of one agent only."
        )
        request = LLMRequest(
            messages=(SystemMessage(system), UserMessage(f"{chat}\n\nNext speaker:"))
        )
        response = await self.llm.complete(request)
        self.usage = self.usage + response.usage
        reply = (response.message.content or "").lower()
        found = [(reply.find(n.lower()), n) for n in state.agents if n.lower() in reply]
        if found:
            return min(found)[1]
        return _round_robin(state)


def _random(state: GroupChatState) -> str:
    """Anyone but the last speaker, at random (the only agent when there is one)."""
    others = [name for name in state.agents if name != state.last_speaker] or list(state.agents)
    return random.choice(others)  # a turn order, not a secret


def _round_robin(state: GroupChatState) -> str:
    agents, last = state.agents, state.last_speaker
    if last not in agents:
        return agents[0]
    return agents[(agents.index(last) + 1) % len(agents)]


_BUILT_IN: dict[str, SpeakerSelector] = {"round_robin": _round_robin, "random": _random}


def _selector(speaker: str | SpeakerSelector) -> SpeakerSelector:
    if isinstance(speaker, str):
        if speaker not in _BUILT_IN:
            raise UserError(
                f"speaker must be one of {sorted(_BUILT_IN)} or a function, got {speaker!r}"
            )
        return _BUILT_IN[speaker]
    if not callable(speaker):
        raise UserError(
            f"speaker must be one of {sorted(_BUILT_IN)} or a function, got {speaker!r}"
        )
    return speaker


class GroupChat(Team[GroupChatResult]):
    """Agents taking turns in one conversation.

    Args:
        agents: ``@llm_chat`` agents (named after their functions) or ``{name: agent}``.
        speaker: ``"round_robin"``, ``"random"`` (anyone but the last speaker), a
            :data:`SpeakerSelector` function, or an :class:`LLMSelector`.
        max_rounds: Most agent messages.
        stop_keywords: A message containing one of these (case-sensitive) ends the chat
            (``()``: none); the seed's CONSENSUS, DONE and TERMINATE by default.
        until: A predicate of the chat: true ends it.

    Raises:
        UserError: For no agents, clashing names, an unknown ``speaker`` name or a bad
            ``max_rounds``.
    """

    def __init__(
        self,
        agents: Sequence[Agent] | dict[str, Agent],
        *,
        speaker: Literal["round_robin", "random"] | SpeakerSelector = "round_robin",
        max_rounds: int = 10,
        stop_keywords: Sequence[str] = ("CONSENSUS", "DONE", "TERMINATE"),
        until: Callable[[GroupChatState], bool] | None = None,
    ) -> None:
        if max_rounds < 1:
            raise UserError("max_rounds must be at least 1")
        self._members = {m.name: m for m in members(agents)}
        self._select = _selector(speaker)
        if isinstance(speaker, LLMSelector):  # undescribed agents: their docstrings' first lines
            for member in self._members.values():
                speaker.descriptions.setdefault(member.name, member.agent.description)
        self.max_rounds = max_rounds
        self.stop_keywords = tuple(stop_keywords)
        self.until = until

    @property
    def agents(self) -> tuple[str, ...]:
        """The agents' names, in order."""
        return tuple(self._members)

    async def _play(
        self,
        message: str,
        root: Emitter,
        abort: AbortSignal | None,
        history: list[dict[str, Any]],
    ) -> GroupChatResult:
        chat = [*_from_dicts(history), GroupMessage("user", message)]
        usage = Usage()
        for index in range(self.max_rounds):
            state = GroupChatState(tuple(chat), self.agents, index)
            member = await self._next(state)
            history, prompt = _view(chat, member.name)
            try:
                result = await play_turn(member, root, abort, prompt, history=history)
            except TeamMemberError as exc:
                chat_so_far = [_as_dict(m) for m in chat]
                raise member_failed(exc, chat_so_far, usage) from exc.__cause__
            usage = usage + result.usage
            chat.append(GroupMessage(member.name, result.text))
            if result.aborted:
                return GroupChatResult(tuple(chat), index + 1, "aborted", usage)
            ended = self._ended(GroupChatState(tuple(chat), self.agents, index + 1))
            if ended is not None:
                return GroupChatResult(tuple(chat), index + 1, ended, usage)
        return GroupChatResult(tuple(chat), self.max_rounds, "max_rounds", usage)

    async def _next(self, state: GroupChatState) -> Member:
        choice = self._select(state)
        name = await choice if inspect.isawaitable(choice) else choice
        member = self._members.get(str(name))
        if member is None:
            raise UserError(f"the speaker selector chose {name!r}, not one of {state.agents}")
        return member

    def _ended(self, state: GroupChatState) -> Literal["keyword", "predicate"] | None:
        text = state.messages[-1].text
        if any(keyword in text for keyword in self.stop_keywords):
            return "keyword"
        if self.until is not None and self.until(state):
            return "predicate"
        return None


def _as_dict(message: GroupMessage) -> dict[str, Any]:
    if message.speaker == "user":
        return {"role": "user", "content": message.text}
    return {"role": "assistant", "name": message.speaker, "content": message.text}


def _from_dicts(history: list[dict[str, Any]]) -> list[GroupMessage]:
    """A chat's earlier messages from its chat dicts (a result's :attr:`GroupChatResult.history`;
    an unnamed assistant turn is the ``assistant``'s, system and tool messages are left out)."""
    chat: list[GroupMessage] = []
    for message in history:
        role, text = message.get("role"), message.get("content")
        if role not in ("user", "assistant") or not isinstance(text, str) or not text:
            continue
        speaker = "user" if role == "user" else str(message.get("name") or "assistant")
        chat.append(GroupMessage(speaker, text))
    return chat


def _view(chat: list[GroupMessage], speaker: str) -> tuple[list[dict[str, Any]], str]:
    """The chat as ``speaker``'s history (user/assistant turns) and its new user message."""
    history: list[dict[str, Any]] = []
    pending: list[str] = []
    for message in chat:
        if message.speaker == speaker:
            history.append({"role": "user", "content": "\n\n".join(pending) or "(go on)"})
            history.append({"role": "assistant", "content": message.text})
            pending = []
        else:
            pending.append(f"[{message.speaker}]: {message.text}")
    prompt = "\n\n".join(pending) or "(your turn again)"
    return history, f"{prompt}\n\n[you are {speaker}; it is your turn]"
