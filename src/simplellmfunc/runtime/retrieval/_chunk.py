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

import bisect
import hashlib
import itertools
import operator
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["Chunk", "DocKind", "chunk_id", "chunk_text"]

DocKind = Literal["markdown", "python", "code", "text"]

_HEADING: Final = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE: Final = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
# Over the whole text (lines joined by newlines): [^\S\n] is \s within one line. A line start
# is found as a newline (much faster than ``^`` in MULTILINE mode, tried at every character).
_PY_DEF: Final = r"(?:async[^\S\n]+def|def|class)[^\S\n]+\w"
_PY_TOP: Final = re.compile(_PY_DEF)
_PY_TOP_AFTER_NEWLINE: Final = re.compile("\n" + _PY_DEF)


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
    end: int  # one past the last line
    atomic: bool  # a fenced code block: keep whole when it fits


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str
    blocks: tuple[_Block, ...]


@dataclass(frozen=True, slots=True)
class _Lines:
    """A document's lines, joined by newlines once: a run of lines is a slice of ``joined``
    and its size (characters, a newline after each line) a difference of ``offsets``."""

    lines: list[str]
    joined: str
    offsets: list[int]  # where each line starts in ``joined``, then len(joined) + 1

    @classmethod
    def of(cls, lines: list[str]) -> _Lines:
        # offsets[i] = the lengths of the lines before i, plus a newline after each: at C
        # speed, no Python loop over the lines.
        lengths = itertools.accumulate(map(len, lines), initial=0)
        return cls(lines, "\n".join(lines), list(map(operator.add, lengths, itertools.count())))

    def size(self, block: _Block) -> int:
        return self.offsets[block.end] - self.offsets[block.start]

    def text(self, start: int, end: int) -> str:
        """Lines ``start`` to ``end`` (exclusive), joined by newlines."""
        return self.joined[self.offsets[start] : self.offsets[end] - 1]


def chunk_id(source: str, heading: str, text: str, repeat: int = 0) -> str:
    """The stable id of a passage (16 hex digits)."""
    key = f"{source}\x00{heading}\x00{text}\x00{repeat}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _paragraphs(lines: list[str], start: int, end: int) -> Iterator[_Block]:
    """Blank-line separated blocks of ``lines[start:end]``."""
    first: int | None = None
    for i in range(start, end):
        if lines[i].strip():
            if first is None:
                first = i
        elif first is not None:
            yield _Block(first, i, False)
            first = None
    if first is not None:
        yield _Block(first, end, False)


def _markdown_sections(lines: list[str]) -> Iterator[_Section]:
    path: list[tuple[int, str]] = []
    heading, pending_start = "", 0
    blocks: list[_Block] = []
    pending = 0  # lines from pending_start not in a block yet
    fence: str | None = None

    def flush_pending() -> None:
        nonlocal pending
        blocks.extend(_paragraphs(lines, pending_start, pending_start + pending))
        pending = 0

    for i, line in enumerate(lines):
        if fence is not None:
            pending += 1
            if line.strip().startswith(fence):
                blocks.append(_Block(pending_start, i + 1, True))
                pending = 0
                fence = None
            continue
        if (match := _FENCE.match(line)) is not None:
            flush_pending()
            fence, pending_start = match.group(1), i
            pending = 1
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
        pending += 1
    if fence is not None:  # an unclosed fence runs to the end
        blocks.append(_Block(pending_start, pending_start + pending, True))
    else:
        flush_pending()
    if blocks:
        yield _Section(heading, tuple(blocks))


def _python_starts(doc: _Lines) -> list[int]:
    """The lines that start a top-level definition: one regular expression over the whole
    text, each match's line found by counting the newlines since the one before."""
    joined = doc.joined
    starts = [0] if _PY_TOP.match(joined) else []
    line, at = 0, 0
    for match in _PY_TOP_AFTER_NEWLINE.finditer(joined):
        newline = match.start()
        line += joined.count("\n", at, newline + 1)
        at = newline + 1
        starts.append(line)
    return starts


def _python_sections(doc: _Lines) -> Iterator[_Section]:
    lines = doc.lines
    starts = _python_starts(doc)
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
        if n > 0:  # a definition: one block, cut only if too long
            heading = lines[starts[n - 1]].rstrip().rstrip(":")
            while end > begin and not lines[end - 1].strip():
                end -= 1
            yield _Section(heading, (_Block(begin, end, True),))
        else:
            yield _Section("", tuple(_paragraphs(lines, begin, end)))


def _cut(doc: _Lines, block: _Block, max_chars: int) -> Iterator[_Block]:
    """A block longer than ``max_chars``, cut at line ends (no line is longer: see
    :func:`_split_long_lines`): each piece the most lines from its first that fit."""
    offsets, start, end = doc.offsets, block.start, block.end
    while offsets[end] - offsets[start] > max_chars:
        fits = bisect.bisect_right(offsets, offsets[start] + max_chars, start + 1, end) - 1
        cut = max(fits, start + 1)
        yield _Block(start, cut, False)
        start = cut
    yield _Block(start, end, False)


def _pack(doc: _Lines, section: _Section, max_chars: int) -> Iterator[list[_Block]]:
    """Consecutive blocks grouped so that each group stays under ``max_chars``."""
    group: list[_Block] = []
    size = 0
    for block in section.blocks:
        whole = doc.size(block)
        pieces = [block] if whole <= max_chars else list(_cut(doc, block, max_chars))
        for piece in pieces:
            length = whole if piece is block else doc.size(piece)
            if group and size + length > max_chars:
                yield group
                group, size = [], 0
            group.append(piece)
            size += length
    if group:
        yield group


def _sections(doc: _Lines, kind: DocKind) -> Iterator[_Section]:
    if kind == "markdown":
        return _markdown_sections(doc.lines)
    if kind == "python":
        return _python_sections(doc)
    return iter([_Section("", tuple(_paragraphs(doc.lines, 0, len(doc.lines))))])


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
    doc = _Lines.of(lines)
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for section in _sections(doc, kind):
        title = " > ".join(part for part in (heading, section.heading) if part)
        for group in _pack(doc, section, max_chars):
            first, end = group[0].start, group[-1].end
            body = doc.text(first, end).strip("\n")
            if not body.strip():
                continue
            key = title + "\x00" + body
            repeat = seen.get(key, 0)
            seen[key] = repeat + 1
            ident = chunk_id(source, title, body, repeat)
            chunks.append(
                Chunk(ident, source, title, numbers[first] + 1, numbers[end - 1] + 1, body)
            )
    return chunks
