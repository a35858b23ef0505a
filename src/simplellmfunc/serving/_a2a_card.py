"""The A2A agent card of a served agent: its interfaces (JSON-RPC, 1.0 and 0.3), its skills
(the agent's own tools and skills, read when the card is first asked for) and every path it is
served at."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
    TransportProtocol,
)

from ..decorators import ChatAgent
from ..runtime.config import ConfiguredAgent
from ..runtime.skills import Skills
from ..tools import Tool
from ._served import ServedAgent

__all__ = ["SkillsOnce", "agent_card", "agent_skills", "card_paths"]

logger = logging.getLogger("simplellmfunc.serving")

#: Where clients before 0.3 read the card (``agent-card.json`` is the current path).
LEGACY_CARD_PATH = "/.well-known/agent.json"


def agent_card(
    served: ServedAgent,
    url: str,
    *,
    bearer: bool = False,
    skills: list[AgentSkill] | None = None,
) -> AgentCard:
    """The agent card of ``served``, reachable with JSON-RPC at ``url`` (1.0 and 0.3).

    Args:
        served: The agent.
        url: The absolute URL of the JSON-RPC endpoint.
        bearer: Say that calls need an ``Authorization: Bearer`` token.
        skills: The card's skills (default: the agent itself as one ``chat`` skill; see
            :func:`agent_skills` for the agent's real ones).
    """
    card = AgentCard(
        name=served.name,
        description=served.description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=v)
            for v in (PROTOCOL_VERSION_CURRENT, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills if skills else [_chat_skill(served)],
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


def _chat_skill(served: ServedAgent) -> AgentSkill:
    return AgentSkill(
        id=served.name, name=served.name, description=served.description, tags=["chat"]
    )


async def agent_skills(served: ServedAgent) -> list[AgentSkill]:
    """The skills of ``served``'s card: one per skill of its toolkit's :class:`Skills`
    (tag ``skill``) and one per other tool (tag ``tool``), in toolkit order; the agent itself
    as one ``chat`` skill when it has none.

    An ``@llm_chat`` agent's toolkit is what a call would run with (its tool providers, MCP
    servers included, are asked); a ``ConfiguredAgent``'s is the one it opened.
    """
    agent = served.agent
    if isinstance(agent, ConfiguredAgent):
        items: list[Any] = list(agent.toolkit)
        tools = [t for i in items if not isinstance(i, Skills) for t in await _tools_of(i)]
    elif isinstance(agent, ChatAgent):
        invocation, _ = await agent.prepare("")
        items = [h for h in invocation.hooks if isinstance(h, Skills)]
        tools = list(invocation.tools)
    else:  # a SessionAgent: nothing to list but the chat itself
        items, tools = [], []
    found: list[AgentSkill] = []
    plumbing: set[str] = set()
    for skills in (i for i in items if isinstance(i, Skills)):
        plumbing.update(t.name for t in skills.toolset)
        found += [
            AgentSkill(id=s.name, name=s.name, description=s.description, tags=["skill"])
            for s in skills.registry
        ]
    found += [
        AgentSkill(id=t.name, name=t.name, description=t.description or t.name, tags=["tool"])
        for t in tools
        if t.name not in plumbing
    ]
    unique = {skill.id: skill for skill in reversed(found)}  # the first of one id wins
    return [unique[key] for key in dict.fromkeys(s.id for s in found)] or [_chat_skill(served)]


async def _tools_of(item: Any) -> list[Tool]:
    """The tools of one toolkit item of a config agent (a tool, or a provider's tools)."""
    if isinstance(item, Tool):
        return [item]
    list_tools = getattr(item, "list_tools", None)
    return list(await list_tools()) if list_tools is not None else []


def card_paths(rpc_path: str = "/a2a") -> frozenset[str]:
    """Every path the agent card is served at (no token needed: it is how clients find out
    how to call): both well-known names, of the server and of ``rpc_path``."""
    names = (AGENT_CARD_WELL_KNOWN_PATH, LEGACY_CARD_PATH)
    return frozenset(names) | {rpc_path.rstrip("/") + name for name in names}


class SkillsOnce:
    """The agent's skills, read at the first card request (the toolkit is open by then)."""

    def __init__(self, served: ServedAgent) -> None:
        self._served = served
        self._lock = anyio.Lock()
        self._skills: list[AgentSkill] | None = None

    async def get(self) -> list[AgentSkill]:
        async with self._lock:
            if self._skills is None:
                try:
                    self._skills = await agent_skills(self._served)
                except Exception:  # boundary: a toolkit that cannot be listed (an MCP server
                    # down ...) must not take the card down: the agent is its one skill
                    logger.warning("the agent's skills cannot be listed", exc_info=True)
                    return [_chat_skill(self._served)]
            return self._skills
