"""A skill: a named bundle of instructions (and tools) that an agent loads when a task needs it.

Two sources make the same :class:`Skill`: a folder in the Agent Skills format (``SKILL.md`` with
YAML front matter, see :mod:`._folder`) and Python code (:func:`skill`). Only ``name`` and
``description`` go into the agent's system prompt; the instructions are read when the model
loads the skill (progressive disclosure), which is why a folder skill's body is read lazily.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...exceptions import SkillError
from ...tools import FunctionTool, Tool

__all__ = ["Skill", "check_skill_name", "skill"]

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024


def check_skill_name(name: object, where: str = "skill") -> str:
    """Return ``name`` if it is a valid skill name (the Agent Skills rule).

    Raises:
        SkillError: Unless it is 1-64 lowercase letters, digits and single inner hyphens.
    """
    if not isinstance(name, str) or len(name) > MAX_NAME or not _NAME.fullmatch(name):
        raise SkillError(
            f"{where}: invalid skill name {name!r}: use 1-{MAX_NAME} lowercase letters, digits "
            "and hyphens (not at the start or end, never two in a row)"
        )
    return name


def check_description(description: object, where: str = "skill") -> str:
    """Return ``description`` stripped if it is a usable skill description.

    Raises:
        SkillError: For an empty or non-string description, or one over 1024 characters.
    """
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{where}: a skill needs a non-empty 'description'")
    text = " ".join(description.split())
    if len(text) > MAX_DESCRIPTION:
        raise SkillError(f"{where}: the description has {len(text)} characters (max 1024)")
    return text


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill.

    Attributes:
        name: Unique name (lowercase letters, digits, hyphens), what ``load_skill`` takes.
        description: What the skill does and when to use it: the only text the model sees
            before loading it, and what :meth:`SkillRegistry.search` matches.
        tags: Labels for search filters.
        instructions: The body the model reads on loading (``None`` for a folder skill: its
            ``SKILL.md`` body, read when loaded).
        tools: Tools that become callable once the skill is loaded (Python skills).
        folder: The skill's folder (folder skills): resource files and scripts live there.
        metadata: Other front matter fields (``license``, ``compatibility``, ``metadata`` ...).
    """

    name: str
    description: str
    tags: tuple[str, ...] = ()
    instructions: str | None = None
    tools: tuple[Tool, ...] = ()
    folder: Path | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        check_skill_name(self.name)
        object.__setattr__(self, "description", check_description(self.description, self.name))
        object.__setattr__(self, "tags", tuple(str(t) for t in self.tags))
        object.__setattr__(self, "tools", tuple(self.tools))
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise SkillError(f"skill {self.name!r}: two of its tools have the same name")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no body): name, description, tags, tool names, folder."""
        return {
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
            "tools": [t.name for t in self.tools],
            "folder": str(self.folder) if self.folder is not None else None,
        }


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else FunctionTool(item)


def skill(
    name: str,
    description: str,
    tags: Sequence[str] = (),
    *,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    instructions: str | None = None,
) -> Callable[[Callable[..., Any]], Skill]:
    """Make a Python skill from a function: the function becomes the skill's first tool.

    The skill's instructions are ``instructions``, else the function's docstring. Register the
    returned :class:`Skill` with a :class:`SkillRegistry` (or use
    :meth:`SkillRegistry.skill`, which does both).

    Example:
        >>> @skill("word-count", "Count the words of a text", tags=["text"])
        ... def count_words(text: str) -> int:
        ...     '''Count the words of ``text``.'''
        ...     return len(text.split())
        >>> count_words.tools[0].name
        'count_words'

    Args:
        name: The skill's name.
        description: What it does and when to use it.
        tags: Labels for search.
        tools: More tools of the skill (``@tool`` functions, ``Tool`` objects, plain functions).
        instructions: What the model reads on loading the skill.

    Raises:
        SkillError: For an invalid name or description.
        ToolDefinitionError: If the function cannot be a tool.
    """

    def decorate(func: Callable[..., Any]) -> Skill:
        body = instructions if instructions is not None else (func.__doc__ or description)
        return Skill(
            name,
            description,
            tuple(tags),
            inspect.cleandoc(body),
            (_as_tool(func), *(_as_tool(t) for t in tools)),
        )

    return decorate
