"""Chunking: a document's text → :class:`Chunk` s that respect its structure.

* **Markdown**: a heading starts a new section (the chunk's ``heading`` is the path of headings,
  ``"Install > From source"``); inside a section, paragraphs are packed up to ``max_chars`` and a
  fenced code block is never cut unless it alone is longer than ``max_chars`` (then it is cut at
  line ends). A ``#`` line inside a fence is code, not a heading.
* **Python**: each top-level ``def`` / ``class`` (with its decorators and comments above) is a
  section whose heading is its signature line; the module's other lines are packed between them.
* **Other code and plain text**: blocks separated by blank lines, packed.

No chunk is longer than ``max_chars``: a line longer than that (a minified file, a 5 MB
one-line JSON) is cut into pieces first, at a space when one is near the end of the piece;
the pieces keep the line's number.

Every chunk knows its first and last line (1-based, inclusive). Its id is a hash of the source,
the heading and the text (plus a counter for repeated text in one file), so an unchanged passage
keeps its id when the file around it changes: re-ingestion keeps its vector.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = ["Chunk", "DocKind", "chunk_id", "chunk_text"]

DocKind = Literal["markdown", "python", "code", "text"]

_HEADING: Final = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE: Final = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_PY_TOP: Final = re.compile(r"^(async\s+def|def|class)\s+\w+")
_PY_TOP_WORDS: Final = ("async", "def", "class")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One passage of a source, as indexed.

    Attributes:
        id: Stable id (see the module docstring).
        source: The source as cited (a path relative to the ingested folder's parent).
        heading: The headings above the passage (``"A > B"``), a Python signature, or ``""``.
        start_line: First line in the source (1-based).
        end_line: Last line (inclusive).
        text: The passage.
    """

    id: str
    source: str
    heading: str
    start_line: int
    end_line: int
    text: str


@dataclass(frozen=True, slots=True)
class _Block:
    start: int  # 0-based line index
    lines: tuple[str, ...]
    atomic: bool  # a fenced code block: keep whole when it fits
    size: int = field(init=False)  # characters, a newline after each line

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", sum(map(len, self.lines)) + len(self.lines))


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str
    blocks: tuple[_Block, ...]


def chunk_id(source: str, heading: str, text: str, repeat: int = 0) -> str:
    """The stable id of a passage (16 hex digits)."""
    key = f"{source}\x00{heading}\x00{text}\x00{repeat}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _paragraphs(lines: list[str], offset: int) -> Iterator[_Block]:
    """Blank-line separated blocks of ``lines`` (which start at line index ``offset``)."""
    start: int | None = None
    for i, line in enumerate([*lines, ""]):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            yield _Block(offset + start, tuple(lines[start:i]), False)
            start = None


def _markdown_sections(lines: list[str]) -> Iterator[_Section]:
    path: list[tuple[int, str]] = []
    heading, pending_start = "", 0
    blocks: list[_Block] = []
    pending: list[str] = []
    fence: str | None = None

    def flush_pending() -> None:
        blocks.extend(_paragraphs(pending, pending_start))
        pending.clear()

    for i, line in enumerate(lines):
        if fence is not None:
            pending.append(line)
            if line.strip().startswith(fence):
                blocks.append(_Block(pending_start, tuple(pending), True))
                pending.clear()
                fence = None
            continue
        if (match := _FENCE.match(line)) is not None:
            flush_pending()
            fence, pending_start = match.group(1), i
            pending.append(line)
            continue
        if (match := _HEADING.match(line)) is not None:
            flush_pending()
            if blocks:
                yield _Section(heading, tuple(blocks))
            blocks = []
            level = len(match.group(1))
            path = [(lvl, text) for lvl, text in path if lvl < level] + [(level, match.group(2))]
            heading = " > ".join(text for _, text in path)
            pending_start = i + 1
            continue
        if not pending:
            pending_start = i
        pending.append(line)
    if fence is not None:  # an unclosed fence runs to the end
        blocks.append(_Block(pending_start, tuple(pending), True))
    else:
        flush_pending()
    if blocks:
        yield _Section(heading, tuple(blocks))


def _python_sections(lines: list[str]) -> Iterator[_Section]:
    starts = [
        i
        for i, line in enumerate(lines)
        if line.startswith(_PY_TOP_WORDS) and _PY_TOP.match(line)  # the cheap test first
    ]
    # A definition owns the decorators and comments right above it.
    owned = []
    for start in starts:
        first = start
        while first > 0 and (lines[first - 1].startswith(("@", "#"))):
            first -= 1
        owned.append(first)
    bounds = [0, *owned, len(lines)]
    for n, (begin, end) in enumerate(itertools.pairwise(bounds)):
        if begin >= end:
            continue
        heading = lines[starts[n - 1]].rstrip().rstrip(":") if n > 0 else ""
        if n > 0:  # a definition: one block, cut only if too long
            body = lines[begin:end]
            while body and not body[-1].strip():
                body.pop()
            yield _Section(heading, (_Block(begin, tuple(body), True),))
        else:
            yield _Section("", tuple(_paragraphs(lines[begin:end], begin)))


def _cut(block: _Block, max_chars: int) -> Iterator[_Block]:
    """A block longer than ``max_chars``, cut at line ends (no line is longer: see
    :func:`_split_long_lines`)."""
    start, size = 0, 0
    lines = block.lines
    for i, length in enumerate(map(len, lines)):
        if size and size + length + 1 > max_chars:
            yield _Block(block.start + start, lines[start:i], False)
            start, size = i, 0
        size += length + 1
    yield _Block(block.start + start, lines[start:], False)


def _pack(section: _Section, max_chars: int) -> Iterator[list[_Block]]:
    """Consecutive blocks grouped so that each group stays under ``max_chars``."""
    group: list[_Block] = []
    size = 0
    for block in section.blocks:
        pieces = [block] if block.size <= max_chars else list(_cut(block, max_chars))
        for piece in pieces:
            if group and size + piece.size > max_chars:
                yield group
                group, size = [], 0
            group.append(piece)
            size += piece.size
    if group:
        yield group


def _sections(lines: list[str], kind: DocKind) -> Iterator[_Section]:
    if kind == "markdown":
        return _markdown_sections(lines)
    if kind == "python":
        return _python_sections(lines)
    return iter([_Section("", tuple(_paragraphs(lines, 0)))])


def _pieces(line: str, max_chars: int) -> Iterator[str]:
    """A line longer than ``max_chars`` in pieces that fit (cut after a space in the last
    quarter of a piece when there is one)."""
    start = 0
    while len(line) - start > max_chars:
        end = start + max_chars
        space = line.rfind(" ", end - max_chars // 4, end)
        if space > start:
            end = space + 1
        yield line[start:end]
        start = end
    yield line[start:]


def _split_long_lines(text: str, max_chars: int) -> tuple[list[str], Sequence[int]]:
    """The lines of ``text`` (long ones in pieces) and each one's 0-based line number."""
    lines = text.splitlines()
    if not lines or max(map(len, lines)) < max_chars:  # the usual case: no line to cut
        return lines, range(len(lines))
    pieces: list[str] = []
    numbers: list[int] = []
    for number, line in enumerate(lines):
        if len(line) < max_chars:
            pieces.append(line)
            numbers.append(number)
            continue
        for piece in _pieces(line, max_chars - 1):  # -1: the newline each line counts
            pieces.append(piece)
            numbers.append(number)
    return pieces, numbers


def chunk_text(
    text: str, source: str, kind: DocKind = "text", *, max_chars: int = 1500, heading: str = ""
) -> list[Chunk]:
    """Cut ``text`` into chunks of at most ``max_chars`` characters.

    Args:
        text: The document.
        source: The source as cited (part of each id).
        kind: How to read the structure (see the module docstring).
        max_chars: Most characters of a chunk (a longer line is cut in pieces).
        heading: A heading above everything (e.g. ``"page 3"`` of a PDF).
    """
    lines, numbers = _split_long_lines(text, max_chars)
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for section in _sections(lines, kind):
        title = " > ".join(part for part in (heading, section.heading) if part)
        for group in _pack(section, max_chars):
            first = group[0].start
            last = group[-1].start + len(group[-1].lines) - 1
            body = "\n".join(lines[first : last + 1]).strip("\n")
            if not body.strip():
                continue
            repeat = seen.get(title + "\x00" + body, 0)
            seen[title + "\x00" + body] = repeat + 1
            ident = chunk_id(source, title, body, repeat)
            start, end = numbers[first] + 1, numbers[last] + 1
            chunks.append(Chunk(ident, source, title, start, end, body))
    return chunks
