"""Glob patterns over workspace-relative paths, for the ``grep`` tool's ``path_pattern``.

Rules (documented to the model in the tool description):

- ``*`` matches within one path component, ``?`` one character, ``[abc]`` / ``[!abc]`` a set,
  ``{a,b}`` either alternative, ``**`` any number of directories (zero included).
- A pattern without ``/`` matches file names at any depth: ``*.py`` is every Python file.
- A pattern with ``/`` matches the whole path relative to the workspace: ``src/**/*.py``.
- An empty pattern, ``*``, ``**`` and ``**/*`` match every file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...exceptions import WorkspaceError

__all__ = ["PathGlob", "compile_glob"]

_META = frozenset("*?[{")
_ALL = frozenset({"", "*", "**", "**/*", "."})


@dataclass(frozen=True, slots=True)
class PathGlob:
    """A compiled path pattern."""

    text: str
    regex: re.Pattern[str]
    base: tuple[str, ...]
    """Leading literal directories: the walk starts there."""
    literals: frozenset[str]
    """Literal components: hidden or ignored directories named here are searched anyway."""

    def matches(self, rel: str) -> bool:
        """Whether the workspace-relative ``/``-separated path ``rel`` matches."""
        return self.regex.fullmatch(rel) is not None


def _has_meta(part: str) -> bool:
    return any(c in _META for c in part)


def _class(part: str, i: int) -> tuple[str, int]:
    """Translate ``[...]`` starting at ``part[i] == '['``; a lone ``[`` is literal."""
    j = i + 1
    if j < len(part) and part[j] in "!^":
        j += 1
    if j < len(part) and part[j] == "]":
        j += 1
    while j < len(part) and part[j] != "]":
        j += 1
    if j >= len(part):
        return re.escape("["), i + 1
    body = part[i + 1 : j]
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    body = body.replace("\\", "\\\\")
    return ("[^/" if negate else "[") + body + "]", j + 1


def _component(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            piece, i = _class(part, i)
            out.append(piece)
            continue
        elif c == "{" and "}" in part[i:]:
            end = part.index("}", i)
            alternatives = part[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_component(a) for a in alternatives) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _translate(parts: list[str]) -> str:
    out: list[str] = []
    last = len(parts) - 1
    for n, part in enumerate(parts):
        if part == "**":
            out.append(".*" if n == last else "(?:[^/]+/)*")
        else:
            out.append(_component(part) + ("" if n == last else "/"))
    return "".join(out)


def compile_glob(pattern: str) -> PathGlob:
    """Compile a workspace-relative path pattern.

    Raises:
        WorkspaceError: For an absolute pattern or one containing ``..`` or a NUL byte.
    """
    text = pattern.strip()
    while text.startswith("./"):
        text = text[2:]
    if "\x00" in text:
        raise WorkspaceError("path_pattern contains a NUL byte")
    if text.startswith("/"):
        raise WorkspaceError(
            f"path_pattern {pattern!r} is absolute; use a pattern relative to the workspace root"
        )
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise WorkspaceError(f"path_pattern {pattern!r} must not contain '..'")
    if text in _ALL or not parts:
        parts = ["**"]
    elif "/" not in text.rstrip("/"):
        parts = ["**", *parts]
    base: list[str] = []
    for part in parts[:-1]:
        if _has_meta(part):
            break
        base.append(part)
    literals = frozenset(p for p in parts if not _has_meta(p))
    try:
        regex = re.compile(_translate(parts), re.DOTALL)
    except re.error as exc:
        raise WorkspaceError(f"invalid path_pattern {pattern!r}: {exc}") from None
    return PathGlob(text or "**", regex, tuple(base), literals)
