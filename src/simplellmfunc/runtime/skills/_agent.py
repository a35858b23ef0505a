"""``skill_agent``: a chat agent that finds the skills a task needs and uses them.

Seed 001's SkillAgent ("discover the best skill in the registry, then run it") in decorator
style: an ``@llm_chat`` agent whose toolkit holds :class:`Skills` with discovery on, so before it
answers a message the skills chosen for it are loaded (their tools become callable), and it can
still load more itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ...decorators import ChatAgent, llm_chat
from ...providers import LLMInterface
from ._registry import SkillRegistry
from ._toolkit import DiscoverMode, Skills

__all__ = ["DEFAULT_SKILL_AGENT_PROMPT", "skill_agent"]

DEFAULT_SKILL_AGENT_PROMPT = (
    "You are a capable assistant. Use the loaded skills' instructions and tools to do the "
    "user's task; load another skill when the task needs it."
)


def skill_agent(
    llm: LLMInterface,
    registry: SkillRegistry,
    system: str = DEFAULT_SKILL_AGENT_PROMPT,
    *,
    toolkit: Iterable[Any] = (),
    discover: DiscoverMode = "llm",
    max_skills: int = 3,
    scripts: bool = False,
    **chat_options: Any,
) -> ChatAgent:
    """An ``@llm_chat`` agent ``agent(task, history)`` that discovers skills for each task.

    Args:
        llm: The model (also the one that chooses skills with ``discover="llm"``).
        registry: The skills to choose from.
        system: The system prompt.
        toolkit: Other tools of the agent.
        discover: How skills are chosen for a message (``"llm"``, ``"search"`` or ``"off"``).
        max_skills: How many skills are loaded for one message at most.
        scripts: Let the agent run the scripts of skill folders.
        **chat_options: Passed to :func:`~simplellmfunc.llm_chat` (``stream``,
            ``enable_event``, ``max_tool_calls``, ``tool_protocol`` ...).

    Returns:
        The agent: call it like any ``@llm_chat`` function, ``agent(task, history=[...])``.
    """
    skills = Skills(registry, discover=discover, max_skills=max_skills, scripts=scripts)

    async def agent(task: str, history: list[dict[str, Any]] | None = None) -> None:
        pass

    agent.__doc__ = system
    return llm_chat(llm, toolkit=[*toolkit, skills], **chat_options)(agent)
