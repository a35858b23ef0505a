"""A skill: a named bundle of instructions (and tools) that an agent loads when a task needs it.

Two sources make the same :class:`Skill`: a folder in the Agent Skills format (``SKILL.md`` with
YAML front matter, see :mod:`._folder`) and Python code (:func:`skill`). Only ``name`` and
``description`` go into the agent's system prompt; the instructions are read when the model
loads the skill (progressive disclosure), which is why a folder skill's body is read lazily.
"""

from __future__ import annotations

import functools
import inspect
import re
import time
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...exceptions import SkillError
from ...tools import FunctionTool, Tool

__all__ = ["Skill", "SkillSignature", "SkillStats", "check_skill_name", "skill"]

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
class SkillSignature:
    """A Python skill's type: what its function takes and returns (seed 001 §18.2).

    Attributes:
        parameters: Each parameter's name and annotation (``Any`` when it has none), in order.
        output_type: The return annotation (``Any`` when there is none).
    """

    parameters: tuple[tuple[str, Any], ...]
    output_type: Any

    @property
    def input_type(self) -> Any:
        """The type of the first parameter (``Any`` for a function without parameters)."""
        return self.parameters[0][1] if self.parameters else Any

    @classmethod
    def of(cls, func: Callable[..., object]) -> SkillSignature:
        """The signature of ``func`` (string annotations resolved where they can be)."""
        try:
            hints = typing.get_type_hints(func)
        except (NameError, TypeError):
            hints = {}
        params = inspect.signature(func).parameters.values()
        return cls(
            tuple((p.name, hints.get(p.name, Any)) for p in params), hints.get("return", Any)
        )


class SkillStats:
    """How often a skill was called and how long its calls took (mutable; one per skill)."""

    __slots__ = ("calls", "failures", "total_seconds")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.total_seconds = 0.0

    @property
    def mean_seconds(self) -> float:
        """Mean duration of a call (0 before the first)."""
        return self.total_seconds / self.calls if self.calls else 0.0

    def record(self, seconds: float, *, failed: bool) -> None:
        """Count one call of ``seconds``."""
        self.calls += 1
        self.failures += failed
        self.total_seconds += seconds

    def to_dict(self) -> dict[str, float | int]:
        """``calls``, ``failures``, ``total_seconds`` and ``mean_seconds``."""
        return {
            "calls": self.calls,
            "failures": self.failures,
            "total_seconds": self.total_seconds,
            "mean_seconds": self.mean_seconds,
        }

    def __repr__(self) -> str:
        return f"SkillStats(calls={self.calls}, mean_seconds={self.mean_seconds:.4f})"


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
        function: The function a Python skill was made from: calling the skill calls it
            (``None`` for a folder skill).
        examples: Usage examples (for few-shot prompts and documentation).
        stats: Calls and durations of direct calls of the skill (see :class:`SkillStats`).
    """

    name: str
    description: str
    tags: tuple[str, ...] = ()
    instructions: str | None = None
    tools: tuple[Tool, ...] = ()
    folder: Path | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False, compare=False)
    function: Callable[..., Any] | None = field(default=None, compare=False)
    examples: tuple[Any, ...] = ()
    stats: SkillStats = field(default_factory=SkillStats, hash=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_skill_name(self.name)
        object.__setattr__(self, "description", check_description(self.description, self.name))
        object.__setattr__(self, "tags", tuple(str(t) for t in self.tags))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "examples", tuple(self.examples))
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise SkillError(f"skill {self.name!r}: two of its tools have the same name")

    @property
    def signature(self) -> SkillSignature | None:
        """The Python skill's type (``None`` for a folder skill)."""
        return None if self.function is None else SkillSignature.of(self.function)

    def __call__(self, *args: object, **kwargs: object) -> Any:
        """Call the skill's function (an ``async`` one returns its awaitable), counted in
        :attr:`stats`.

        Raises:
            SkillError: For a folder skill, which has no function to call.
        """
        if self.function is None:
            raise SkillError(f"skill {self.name!r} is a folder skill: load it in an agent")
        if inspect.iscoroutinefunction(self.function):
            return self._timed_async(*args, **kwargs)
        start = time.perf_counter()
        failed = True
        try:
            value = self.function(*args, **kwargs)
            failed = False
            return value
        finally:
            self.stats.record(time.perf_counter() - start, failed=failed)

    async def _timed_async(self, *args: object, **kwargs: object) -> Any:
        assert self.function is not None
        start = time.perf_counter()
        failed = True
        try:
            value = await self.function(*args, **kwargs)
            failed = False
            return value
        finally:
            self.stats.record(time.perf_counter() - start, failed=failed)

    def bind(self, **kwargs: object) -> Skill:
        """This skill with some keyword arguments fixed (partial application, seed §18.2): the
        new skill's function and first tool take the other parameters only.

        Raises:
            SkillError: For a folder skill, or a name the function has no parameter for.
        """
        if self.function is None:
            raise SkillError(f"skill {self.name!r} is a folder skill: nothing to bind")
        signature = inspect.signature(self.function)
        unknown = sorted(set(kwargs) - set(signature.parameters))
        if unknown:
            raise SkillError(f"skill {self.name!r} has no parameter {', '.join(unknown)}")
        bound = _bound(self.function, kwargs, signature)
        tools = (_as_tool(bound), *self.tools[1:]) if self.tools else ()
        return replace(self, function=bound, tools=tools, stats=SkillStats())

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no body): name, description, tags, tool names, folder,
        examples (as text) and stats."""
        return {
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
            "tools": [t.name for t in self.tools],
            "folder": str(self.folder) if self.folder is not None else None,
            "examples": [e if isinstance(e, str) else repr(e) for e in self.examples],
            "stats": self.stats.to_dict(),
        }


def _bound(
    func: Callable[..., Any], fixed: Mapping[str, Any], signature: inspect.Signature
) -> Callable[..., Any]:
    """``func`` with ``fixed`` keyword arguments, its signature without them."""
    partial = functools.partial(func, **fixed)
    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(func):

        async def call_async(*args: Any, **kwargs: Any) -> Any:
            return await partial(*args, **kwargs)

        wrapper = call_async
    else:

        def call(*args: object, **kwargs: object) -> Any:
            return partial(*args, **kwargs)

        wrapper = call
    functools.update_wrapper(wrapper, func)
    kept = [p for name, p in signature.parameters.items() if name not in fixed]
    # inspect.signature follows __wrapped__ to func: the reduced signature replaces it.
    vars(wrapper).pop("__wrapped__")
    vars(wrapper)["__signature__"] = signature.replace(parameters=kept)
    return wrapper


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else FunctionTool(item)


def skill(
    name: str,
    description: str,
    tags: Sequence[str] = (),
    *,
    tools: Iterable[Tool | Callable[..., Any]] = (),
    instructions: str | None = None,
    examples: Iterable[object] = (),
) -> Callable[[Callable[..., Any]], Skill]:
    """Make a Python skill from a function: the function becomes the skill's first tool, and
    the skill stays callable like the function (``summarize("text")``).

    The skill's instructions are ``instructions``, else the function's docstring. Register the
    returned :class:`Skill` with a :class:`SkillRegistry` (or use
    :meth:`SkillRegistry.skill`, which does both). The seed registers into a global registry;
    here there is none (importing a module registers nothing anywhere).

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
        examples: Usage examples.

    Raises:
        SkillError: For an invalid name or description.
        ToolDefinitionError: If the function cannot be a tool.
    """

    def decorate(func: Callable[..., object]) -> Skill:
        body = instructions if instructions is not None else (func.__doc__ or description)
        return Skill(
            name,
            description,
            tuple(tags),
            inspect.cleandoc(body),
            (_as_tool(func), *(_as_tool(t) for t in tools)),
            function=func,
            examples=tuple(examples),
        )

    return decorate
