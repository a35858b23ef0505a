"""``Skills``: a registry as an agent's toolkit, with progressive disclosure.

The model sees each skill's name and description in the system prompt (the ``load_skill``
tool's guidance) and nothing more until it calls ``load_skill``; the result is the skill's body,
the list of its files and the names of its tools. Whether a skill is loaded is read from the
transcript (a ``load_skill`` call of a known skill), so it lasts as long as the conversation
holds that call, across turns too, and the run hook makes the loaded skills' tools callable from
the next LLM call on (:meth:`~simplellmfunc.engine.RunContext.add_tools`).

With ``discover`` the hook chooses skills for the user's message before the first LLM call of
a turn and records them as ``load_skill`` calls with their results, so the history stays valid
and says which skills were chosen. ``Skills`` is a tool provider and a run hook: put it in a
``toolkit``; the decorators use toolkit items that are hooks as hooks.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from ...builtin import FileToolset
from ...engine import RunContext, RunHook, RunView
from ...exceptions import SkillError, ToolExecutionError
from ...tools import Tool, parse_docstring
from ...types import (
    AssistantMessage,
    AssistantMessageMutation,
    ContextMutation,
    Message,
    ToolResultMutation,
    UserMessage,
)
from ..commands import run_command
from ._folder import list_files, read_body
from ._registry import SkillRegistry
from ._skill import Skill

__all__ = ["LOAD_SKILL", "DiscoverMode", "Skills", "loaded_skills"]

LOAD_SKILL = "load_skill"
DiscoverMode = Literal["off", "search", "llm"]
_INTERPRETERS = {".py": sys.executable, ".sh": "/bin/sh", ".bash": "bash"}


def _description(method: object) -> str:
    return " ".join(parse_docstring(getattr(method, "__doc__", None)).description.split())


def loaded_skills(messages: Sequence[Message], registry: SkillRegistry) -> list[str]:
    """Names of the registry's skills that ``load_skill`` calls in ``messages`` loaded."""
    names: list[str] = []
    for message in messages:
        if not isinstance(message, AssistantMessage):
            continue
        for call in message.tool_calls:
            if call.name != LOAD_SKILL:
                continue
            try:
                name = json.loads(call.arguments or "{}").get("name")
            except (ValueError, AttributeError):
                continue
            if isinstance(name, str) and name in registry and name not in names:
                names.append(name)
    return names


class Skills(RunHook):
    """The skills of a :class:`SkillRegistry` as a toolkit item.

    Tools: ``load_skill`` always; ``find_skills`` when the registry has more skills than
    ``catalogue_limit`` (the prompt then lists none); ``read_skill_file`` (through a
    :class:`~simplellmfunc.builtin.FileToolset` on the skill's folder) when a folder skill
    exists; ``run_skill_script`` when ``scripts`` is on and a folder skill exists.

    Args:
        registry: The skills (a registry, or skills / skill folders to build one from).
        discover: Choose skills for each new user message before the model answers:
            ``"search"`` (word search), ``"llm"`` (one call of the run's model, see
            :meth:`SkillRegistry.discover`) or ``"off"``.
        max_skills: How many skills discovery loads at most.
        preload: Skills loaded at the start of every conversation.
        scripts: Offer ``run_skill_script`` (runs a script of a skill folder, in that folder).
        script_timeout: Seconds before a script's process group is killed.
        catalogue_limit: Most skills listed in the system prompt.

    Raises:
        SkillError: For an unknown preloaded skill or an invalid skill folder.
    """

    def __init__(
        self,
        registry: SkillRegistry | Iterable[Skill | str | os.PathLike[str]],
        *,
        discover: DiscoverMode = "off",
        max_skills: int = 3,
        preload: Sequence[str] = (),
        scripts: bool = False,
        script_timeout: float = 60.0,
        catalogue_limit: int = 50,
    ) -> None:
        self.registry = registry if isinstance(registry, SkillRegistry) else _registry(registry)
        for name in preload:
            self.registry.get(name)
        self.discover = discover
        self.max_skills = max_skills
        self.preload = tuple(preload)
        self.script_timeout = script_timeout
        self.catalogue_limit = catalogue_limit
        self._files: dict[Path, FileToolset] = {}
        folders = any(s.folder is not None for s in self.registry)
        methods: list[Callable[..., Any]] = [self.load_skill]
        if len(self.registry) > catalogue_limit:
            methods.append(self.find_skills)
        if folders:
            methods.append(self.read_skill_file)
        if folders and scripts:
            methods.append(self.run_skill_script)
        self._tools = tuple(
            Tool(
                m.__name__,
                _description(m),
                m,
                prompt_injection_builder=self._catalogue if m == self.load_skill else None,
            )
            for m in methods
        )

    def __repr__(self) -> str:
        return f"Skills({len(self.registry)} skills, discover={self.discover!r})"

    @property
    def toolset(self) -> list[Tool]:
        """The tools alone (without the hook no skill's tools become callable)."""
        return list(self._tools)

    async def list_tools(self) -> Sequence[Tool]:
        """The skill tools (``load_skill`` ...): a tool provider's answer."""
        return self._tools

    # ---- the catalogue in the system prompt ----

    def _catalogue(self, _: Tool) -> str:
        skills = list(self.registry)
        intro = (
            "Skills give you instructions (and sometimes tools and files) for particular tasks. "
            "When a task matches a skill's description, call load_skill with its name first "
            "and follow what it says."
        )
        if len(skills) > self.catalogue_limit:
            return f"{intro} There are {len(skills)} skills: find them with find_skills."
        lines = "\n".join(f"- {s.name}: {s.description}" for s in skills)
        return f"{intro}\nAvailable skills:\n{lines}"

    # ---- model-facing tools (their docstrings are the descriptions the model reads) ----

    async def load_skill(self, name: str) -> str:
        """Load a skill: returns its instructions, its files and the tools it makes available.

        Args:
            name: The skill's name, as listed.

        Raises:
            SkillError: If no skill has that name.
        """
        return self._render(self.registry.get(name))

    async def find_skills(self, query: str, tags: list[str] | None = None) -> str:
        """Search the skills by words of their name and description, and by tags.

        Args:
            query: Words describing the task.
            tags: Tags every result must have.
        """
        found = self.registry.search(query, tags or (), limit=10)
        if not found:
            return "No skill matches."
        return "\n".join(
            f"- {s.name}: {s.description}" + (f" [tags: {', '.join(s.tags)}]" if s.tags else "")
            for s in found
        )

    async def read_skill_file(
        self,
        skill: str,
        path: str,
        start_line: Annotated[int, Field(ge=1)] | None = None,
        end_line: Annotated[int, Field(ge=1)] | None = None,
    ) -> str:
        """Read a file of a loaded skill's folder (lines come back as `<n> | <text>`).

        Args:
            skill: The skill's name.
            path: The file's path inside the skill folder, as load_skill listed it.
            start_line: First line to show (1-based); default 1.
            end_line: Last line to show; default the end of the file.

        Raises:
            SkillError: If the skill is unknown or has no folder.
            WorkspaceError: If the path leaves the folder, is missing or is binary.
        """
        files = self._toolset(self._folder(skill))
        return await files.read_file(path, start_line, end_line)

    async def run_skill_script(self, skill: str, script: str, args: list[str] | None = None) -> str:
        """Run a script of a loaded skill's folder (`.py` with Python, `.sh` with sh, others
        directly) with the folder as working directory; returns its output.

        Args:
            skill: The skill's name.
            script: The script's path inside the skill folder, e.g. `scripts/extract.py`.
            args: Command-line arguments, one string each.

        Raises:
            SkillError: If the skill is unknown, or the script is not a file of its folder.
            ToolExecutionError: When the script fails or times out.
        """
        folder = self._folder(skill)
        target = (folder / script).resolve()
        if not target.is_relative_to(folder) or not target.is_file():
            raise SkillError(f"{script!r} is not a file of skill {skill!r}")
        interpreter = _INTERPRETERS.get(target.suffix)
        words = ([interpreter] if interpreter else []) + [str(target), *(args or [])]
        output = await run_command(shlex.join(words), timeout=self.script_timeout, cwd=folder)
        if output.timed_out:
            raise ToolExecutionError(f"the script timed out after {self.script_timeout} s")
        if output.returncode != 0:
            raise ToolExecutionError(
                f"the script exited with status {output.returncode}: {output.stderr[-2000:]}"
            )
        text = output.stdout_text()
        return text + (f"\n[stderr]\n{output.stderr}" if output.stderr.strip() else "")

    # ---- helpers ----

    def _folder(self, name: str) -> Path:
        found = self.registry.get(name)
        if found.folder is None:
            raise SkillError(f"skill {name!r} has no folder (it is a Python skill)")
        return found.folder

    def _toolset(self, folder: Path) -> FileToolset:
        files = self._files.get(folder)
        if files is None:
            files = self._files[folder] = FileToolset(folder)
        return files

    def _render(self, found: Skill) -> str:
        parts = [f"# Skill: {found.name}", read_body(found)]
        if found.folder is not None:
            parts.append(f"Skill folder: {found.folder}")
            files = list_files(found)
            if files:
                listing = "\n".join(f"- {f}" for f in files)
                parts.append(f"Files (read them with read_skill_file):\n{listing}")
        if found.tools:
            names = ", ".join(t.name for t in found.tools)
            parts.append(f"Tools you can call now: {names}")
        return "\n\n".join(p for p in parts if p.strip())

    # ---- the run hook ----

    async def before_llm_call(self, run: RunView) -> Sequence[ContextMutation]:
        """Enable the tools of loaded skills; before a turn's first call, load the preloaded
        and discovered skills (recorded as ``load_skill`` calls)."""
        context = run.context
        if context is None:
            return ()
        loaded = loaded_skills(run.transcript.messages, self.registry)
        mutations: list[ContextMutation] = []
        if run.iteration == 1:
            chosen = [n for n in await self._choose(run, context) if n not in loaded]
            if chosen:
                mutations = self._load_calls(chosen)
                loaded += chosen
        for name in loaded:
            context.add_tools(self.registry.get(name).tools)
        return mutations

    async def _choose(self, run: RunView, context: RunContext) -> list[str]:
        names = list(self.preload)
        task = _last_user_text(run.transcript.messages)
        if self.discover == "off" or not task:
            return names
        if self.discover == "search":
            found = self.registry.search(task, limit=self.max_skills)
        else:
            llm = context.invocation.llm
            found, usage = await self.registry.discover_with_usage(task, llm, self.max_skills)
            context.add_usage(usage)
        return list(dict.fromkeys(names + [s.name for s in found]))

    def _load_calls(self, names: Sequence[str]) -> list[ContextMutation]:
        ids = [f"call_skill_{uuid.uuid4().hex[:12]}" for _ in names]
        calls = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": LOAD_SKILL, "arguments": json.dumps({"name": name})},
            }
            for call_id, name in zip(ids, names, strict=True)
        ]
        results: list[ContextMutation] = [
            ToolResultMutation(call_id, self._render(self.registry.get(name)))
            for call_id, name in zip(ids, names, strict=True)
        ]
        return [AssistantMessageMutation(content=None, tool_calls=calls), *results]


def _registry(items: Iterable[Skill | str | os.PathLike[str]]) -> SkillRegistry:
    registry = SkillRegistry()
    for item in items:
        if isinstance(item, Skill):
            registry.register(item)
        else:
            registry.add_dir(item)
    return registry


def _last_user_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""
