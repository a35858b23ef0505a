"""``SkillRegistry``: the skills an agent may use, by name, with search and discovery."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..._usage import Usage
from ...exceptions import SkillError
from ...providers import LLMInterface
from ...tools import Tool
from ._folder import find_skill_folders, read_skill_folder
from ._search import choose_skills, discovery_request, rank
from ._skill import Skill, skill

__all__ = ["SkillRegistry"]

_SHORTLIST = 20


class SkillRegistry:
    """Skills by name: Python skills and Agent Skills folders, searched by words and tags.

    One registry per agent setup (no global one: importing a module registers nothing
    anywhere). Pass it to :class:`Skills` to give an agent its skills.

    Args:
        skills: Skills to register now.
        dirs: Folders to scan for skill folders now (see :meth:`add_dir`).

    Raises:
        SkillError: For two skills with one name or an invalid skill folder.
    """

    def __init__(
        self,
        skills: Iterable[Skill] = (),
        *,
        dirs: Iterable[str | os.PathLike[str]] = (),
    ) -> None:
        self._skills: dict[str, Skill] = {}
        for item in skills:
            self.register(item)
        for folder in dirs:
            self.add_dir(folder)

    def register(self, item: Skill) -> Skill:
        """Add ``item`` and return it.

        Raises:
            SkillError: If another skill has its name, or one of its tools has the name of a
                tool of another skill (loaded together, they could not both be called).
        """
        if item.name in self._skills:
            raise SkillError(f"two skills are named {item.name!r}")
        owners = {t.name: s.name for s in self._skills.values() for t in s.tools}
        for candidate in item.tools:
            if candidate.name in owners:
                raise SkillError(
                    f"skill {item.name!r}: tool {candidate.name!r} is also a tool of skill "
                    f"{owners[candidate.name]!r}"
                )
        self._skills[item.name] = item
        return item

    def register_pack(self, pack: Iterable[Skill] | Mapping[str, Skill]) -> list[Skill]:
        """Register every skill of ``pack`` (an iterable of skills or a ``{name: skill}``
        mapping), all or none: a clash anywhere registers nothing.

        Raises:
            SkillError: For a name (or tool name) that clashes, within the pack or here.
        """
        items = list(pack.values() if isinstance(pack, Mapping) else pack)
        trial = SkillRegistry(self)  # check the whole pack before touching this registry
        for item in items:
            trial.register(item)
        return [self.register(item) for item in items]

    def build_route(self) -> dict[str, Skill]:
        """``{name: skill}`` for every skill: a dispatch table (the seed's ``Route``), whose
        values a router calls (Python skills) or loads into an agent (folder skills)."""
        return {item.name: item for item in self}

    def add_dir(self, root: str | os.PathLike[str]) -> list[Skill]:
        """Register every skill folder under ``root`` (``root`` itself if it holds SKILL.md).

        Returns:
            The skills found, in folder order.

        Raises:
            SkillError: If ``root`` is not a directory or a skill folder is invalid.
        """
        return [self.register(read_skill_folder(f)) for f in find_skill_folders(root)]

    def skill(
        self,
        name: str,
        description: str,
        tags: Sequence[str] = (),
        *,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        instructions: str | None = None,
        examples: Iterable[object] = (),
    ) -> Callable[[Callable[..., Any]], Skill]:
        """:func:`skill`, registering the skill here."""
        make = skill(
            name, description, tags, tools=tools, instructions=instructions, examples=examples
        )
        return lambda func: self.register(make(func))

    def get(self, name: str) -> Skill:
        """The skill called ``name``.

        Raises:
            SkillError: If there is none (the message lists the names there are).
        """
        found = self._skills.get(name)
        if found is None:
            known = ", ".join(sorted(self._skills)) or "none"
            raise SkillError(f"no skill is named {name!r} (skills: {known})")
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._skills

    def __iter__(self) -> Iterator[Skill]:
        return iter(sorted(self._skills.values(), key=lambda s: s.name))

    def __len__(self) -> int:
        return len(self._skills)

    def __repr__(self) -> str:
        return f"SkillRegistry({len(self)} skills)"

    def search(
        self, query: str = "", tags: Sequence[str] = (), limit: int | None = 5
    ) -> list[Skill]:
        """Skills matching ``query`` (words of the name, tags and description) and carrying
        every tag of ``tags``, best first; an empty query lists every skill with the tags."""
        return rank(self, query, tags, limit)

    async def discover(self, task: str, llm: LLMInterface, limit: int = 3) -> list[Skill]:
        """Let ``llm`` choose up to ``limit`` skills for ``task`` (one call).

        The model sees the names and descriptions of every skill (of the best 20 word matches
        when there are more) and answers with a JSON list of names; a reply that is not JSON
        is read for skill names.

        Raises:
            ProviderError: When the call fails.
        """
        return (await self.discover_with_usage(task, llm, limit))[0]

    async def discover_with_usage(
        self, task: str, llm: LLMInterface, limit: int = 3
    ) -> tuple[list[Skill], Usage]:
        """:meth:`discover`, with the usage of its call (to add to a run's total)."""
        candidates = list(self) if len(self) <= _SHORTLIST else self.search(task, limit=_SHORTLIST)
        if not candidates or limit < 1:
            return [], Usage()
        response = await llm.complete(discovery_request(llm, task, candidates, limit))
        return choose_skills(response, candidates, limit), response.usage

    def stats(self) -> dict[str, Any]:
        """Counts: skills, folder skills, Python skills, tools, skills per tag, and each
        skill's call stats (``calls``, ``mean_seconds`` ...) under ``calls``."""
        tags: dict[str, int] = {}
        for item in self:
            for tag in item.tags:
                tags[tag] = tags.get(tag, 0) + 1
        return {
            "skills": len(self),
            "folder_skills": sum(1 for s in self if s.folder is not None),
            "python_skills": sum(1 for s in self if s.folder is None),
            "tools": sum(len(s.tools) for s in self),
            "tags": dict(sorted(tags.items())),
            "calls": {s.name: s.stats.to_dict() for s in self if s.function is not None},
        }
