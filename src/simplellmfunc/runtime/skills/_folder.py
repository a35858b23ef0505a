"""Skill folders in the Agent Skills format: a folder holding ``SKILL.md``.

``SKILL.md`` starts with YAML front matter between two ``---`` lines: ``name`` (lowercase
letters, digits, hyphens; the folder's name) and ``description`` are required; ``tags`` (or
``metadata.tags``), ``license``, ``compatibility``, ``allowed-tools`` and ``metadata`` are kept.
The Markdown after the front matter is the body, read only when a model loads the skill.
Scripts and resource files sit beside it (``scripts/``, ``references/``, ``assets/`` ...).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ...exceptions import SkillError
from ._skill import Skill, check_description, check_skill_name

__all__ = ["SKILL_FILE", "find_skill_folders", "list_files", "read_body", "read_skill_folder"]

SKILL_FILE = "SKILL.md"
_MAX_FILES = 200


def _split(text: str, where: str) -> tuple[dict[str, Any], str]:
    """The front matter (a mapping) and the body of a ``SKILL.md`` text."""
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise SkillError(f"{where}: SKILL.md must start with YAML front matter between '---' lines")
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        raise SkillError(f"{where}: the front matter of SKILL.md has no closing '---' line")
    try:
        data = yaml.safe_load("".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise SkillError(f"{where}: invalid YAML front matter: {exc}") from None
    if not isinstance(data, dict):
        raise SkillError(f"{where}: the front matter must be a mapping with name and description")
    return data, "".join(lines[end + 1 :]).strip()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read: {exc}") from None


def _tags(data: dict[str, Any]) -> tuple[str, ...]:
    raw = data.get("tags")
    if raw is None and isinstance(data.get("metadata"), dict):
        raw = data["metadata"].get("tags")
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = raw.split(",")
    if not isinstance(raw, list):
        raise SkillError("'tags' must be a list of strings")
    return tuple(str(t).strip() for t in raw if str(t).strip())


def read_skill_folder(folder: str | os.PathLike[str]) -> Skill:
    """The skill of one folder (front matter only; the body is read on loading).

    Raises:
        SkillError: If ``SKILL.md`` is missing or unreadable, has no valid front matter, lacks
            a valid ``name`` or ``description``, or its name differs from the folder's.
    """
    path = Path(folder).resolve()
    where = str(path / SKILL_FILE)
    data, _ = _split(_read(path / SKILL_FILE), where)
    name = check_skill_name(data.get("name"), where)
    if name != path.name:
        raise SkillError(f"{where}: the skill name {name!r} must be the folder's {path.name!r}")
    description = check_description(data.get("description"), where)
    try:
        tags = _tags(data)
    except SkillError as exc:
        raise SkillError(f"{where}: {exc}") from None
    extra = {k: v for k, v in data.items() if k not in ("name", "description", "tags")}
    return Skill(name, description, tags, folder=path, metadata=extra)


def read_body(skill: Skill) -> str:
    """The instructions of ``skill``: its own, or the body of its ``SKILL.md`` read now.

    Raises:
        SkillError: If the folder's ``SKILL.md`` cannot be read any more.
    """
    if skill.instructions is not None or skill.folder is None:
        return skill.instructions or ""
    path = skill.folder / SKILL_FILE
    return _split(_read(path), str(path))[1]


def find_skill_folders(root: str | os.PathLike[str]) -> list[Path]:
    """Every skill folder under ``root`` (``root`` itself when it holds ``SKILL.md``), sorted.

    Hidden folders are skipped, and a skill folder's own subfolders are not searched.

    Raises:
        SkillError: If ``root`` is not a directory.
    """
    base = Path(root).resolve()
    if not base.is_dir():
        raise SkillError(f"skills folder {str(root)!r} is not a directory")
    found: list[Path] = []
    for current, dirs, files in os.walk(base):
        if SKILL_FILE in files:
            found.append(Path(current))
            dirs.clear()
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(found)


def list_files(skill: Skill) -> list[str]:
    """The folder's files other than ``SKILL.md``, relative, sorted (at most 200)."""
    if skill.folder is None:
        return []
    return sorted(_walk(skill.folder))[:_MAX_FILES]


def _walk(folder: Path) -> Iterator[str]:
    for current, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for name in files:
            relative = Path(current, name).relative_to(folder).as_posix()
            if relative != SKILL_FILE and not name.startswith("."):
                yield relative
