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

import contextlib
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
# The line breaks of str.splitlines other than "\n": a text with one goes through _Text.split.
_OTHER_BREAKS: Final = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


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
    start: int  # where its first line starts in the document's text
    end: int  # where the line after its last one starts (one past the text's end at the end)
    atomic: bool  # a fenced code block: keep whole when it fits


@dataclass(frozen=True, slots=True)
class _Section:
    heading: str
    blocks: tuple[_Block, ...]


class _LongLine(Exception):
    """A line at least ``max_chars`` long: the document is read again with it cut in pieces
    (never seen outside)."""


@dataclass(frozen=True, slots=True)
class _Text:
    """A document's lines joined by newlines, each block a range of positions in it (its size
    is its length, a newline counted after each line), so nothing is done per line where the
    structure is found by searching the text: a Python file's definitions, the cuts of a long
    block.

    Attributes:
        joined: The lines, joined by newlines.
        numbers: Each line's number (0-based) when long lines were cut in pieces (a piece is a
            line here, numbered as the line it comes from); ``None``: the lines are the text's.
    """

    joined: str
    numbers: Sequence[int] | None

    @classmethod
    def of(cls, text: str) -> _Text | None:
        """The text as it is, when its only line break is ``\\n`` (the usual case: no copy of
        its lines is made); ``None`` otherwise."""
        if any(brk in text for brk in _OTHER_BREAKS):
            return None
        return cls(text[:-1] if text.endswith("\n") else text, None)

    @classmethod
    def split(cls, text: str, max_chars: int) -> _Text:
        """The text's lines, as :meth:`str.splitlines` finds them, long ones in pieces."""
        lines, numbers = _split_long_lines(text, max_chars)
        return cls("\n".join(lines), numbers)

    @property
    def end(self) -> int:
        """The end of the last block: one past the text (as if a newline followed it)."""
        return len(self.joined) + 1

    def text(self, start: int, end: int) -> str:
        """The lines from ``start`` to ``end``, joined by newlines."""
        return self.joined[start : end - 1]

    def lines(self, start: int, end: int) -> list[str]:
        """The lines from ``start`` to ``end``."""
        return self.joined[start : end - 1].split("\n")

    def cut(self, block: _Block, max_chars: int) -> Iterator[_Block]:
        """A block longer than ``max_chars``, cut at line ends: each piece the most lines from
        its first that fit.

        Raises:
            _LongLine: If a line alone does not fit.
        """
        joined, start, end = self.joined, block.start, block.end
        while end - start > max_chars:
            newline = joined.rfind("\n", start, start + max_chars)
            if newline < 0:
                raise _LongLine
            yield _Block(start, newline + 1, False)
            start = newline + 1
        yield _Block(start, end, False)


def chunk_id(source: str, heading: str, text: str, repeat: int = 0) -> str:
    """The stable id of a passage (16 hex digits)."""
    key = f"{source}\x00{heading}\x00{text}\x00{repeat}"
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _paragraphs(doc: _Text, start: int, end: int) -> Iterator[_Block]:
    """Blank-line separated blocks of the lines from ``start`` to ``end``."""
    first: int | None = None
    at = start
    for line in doc.lines(start, end):
        if line and not line.isspace():
            if first is None:
                first = at
        elif first is not None:
            yield _Block(first, at, False)
            first = None
        at += len(line) + 1
    if first is not None:
        yield _Block(first, end, False)


def _markdown_sections(doc: _Text, max_chars: int) -> Iterator[_Section]:
    lines = doc.lines(0, doc.end)
    # Where each line starts; then the end.
    offsets = list(
        map(operator.add, itertools.accumulate(map(len, lines), initial=0), itertools.count())
    )
    path: list[tuple[int, str]] = []
    heading, pending_start = "", 0
    blocks: list[_Block] = []
    pending = 0  # lines from pending_start not in a block yet
    fence: str | None = None

    def flush_pending() -> None:
        nonlocal pending
        if pending:
            blocks.extend(
                _paragraphs(doc, offsets[pending_start], offsets[pending_start + pending])
            )
        pending = 0

    for i, line in enumerate(lines):
        if fence is not None:
            pending += 1
            if line.strip().startswith(fence):
                blocks.append(_Block(offsets[pending_start], offsets[i + 1], True))
                pending = 0
                fence = None
            continue
        if (match := _FENCE.match(line)) is not None:
            flush_pending()
            fence, pending_start = match.group(1), i
            pending = 1
            continue
        if (match := _HEADING.match(line)) is not None:
            if len(line) >= max_chars:  # in no block, so no cut would find it
                raise _LongLine
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
        blocks.append(_Block(offsets[pending_start], offsets[pending_start + pending], True))
    else:
        flush_pending()
    if blocks:
        yield _Section(heading, tuple(blocks))


def _python_starts(doc: _Text) -> list[int]:
    """Where the lines that start a top-level definition start: one regular expression over
    the whole text."""
    joined = doc.joined
    starts = [0] if _PY_TOP.match(joined) else []
    starts += [match.start() + 1 for match in _PY_TOP_AFTER_NEWLINE.finditer(joined)]
    return starts


def _line_start(joined: str, begin: int, end: int) -> int:
    """Where the line that ends right before ``end`` starts (not before ``begin``)."""
    return joined.rfind("\n", begin, end - 1) + 1 or begin


def _python_sections(doc: _Text) -> Iterator[_Section]:
    joined = doc.joined
    starts = _python_starts(doc)
    # A definition owns the decorators and comments right above it.
    owned = []
    for start in starts:
        first = start
        while first > 0 and joined.startswith(("@", "#"), above := _line_start(joined, 0, first)):
            first = above
        owned.append(first)
    bounds = [0, *owned, doc.end]
    for n, (begin, end) in enumerate(itertools.pairwise(bounds)):
        if begin >= end:
            continue
        if n > 0:  # a definition: one block, cut only if too long
            line_end = joined.find("\n", starts[n - 1])
            heading = joined[starts[n - 1] : line_end if line_end >= 0 else len(joined)]
            heading = heading.rstrip().rstrip(":")
            while end > begin:  # without the blank lines at its end
                last = _line_start(joined, begin, end)
                if (line := joined[last : end - 1]) and not line.isspace():
                    break
                end = last
            yield _Section(heading, (_Block(begin, end, True),))
        else:
            yield _Section("", tuple(_paragraphs(doc, begin, end)))


def _pack(doc: _Text, section: _Section, max_chars: int) -> Iterator[list[_Block]]:
    """Consecutive blocks grouped so that each group stays under ``max_chars``."""
    group: list[_Block] = []
    size = 0
    for block in section.blocks:
        pieces = [block] if block.end - block.start <= max_chars else doc.cut(block, max_chars)
        for piece in pieces:
            length = piece.end - piece.start
            if group and size + length > max_chars:
                yield group
                group, size = [], 0
            group.append(piece)
            size += length
    if group:
        yield group


def _sections(doc: _Text, kind: DocKind, max_chars: int) -> Iterator[_Section]:
    if kind == "markdown":
        return _markdown_sections(doc, max_chars)
    if kind == "python":
        return _python_sections(doc)
    return iter([_Section("", tuple(_paragraphs(doc, 0, doc.end)))])


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
    if not lines or max(map(len, lines)) < max_chars:  # no line to cut
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
    if (doc := _Text.of(text)) is not None:
        with contextlib.suppress(_LongLine):
            return _chunks(doc, kind, source, max_chars, heading)
    return _chunks(_Text.split(text, max_chars), kind, source, max_chars, heading)


def _chunks(doc: _Text, kind: DocKind, source: str, max_chars: int, heading: str) -> list[Chunk]:
    joined, numbers = doc.joined, doc.numbers
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    at = line = 0  # line: the newlines before at (the chunks come in order: counted once)
    for section in _sections(doc, kind, max_chars):
        title = " > ".join(part for part in (heading, section.heading) if part)
        for group in _pack(doc, section, max_chars):
            first, end = group[0].start, group[-1].end
            body = doc.text(first, end).strip("\n")
            if not body or body.isspace():
                continue
            key = title + "\x00" + body
            repeat = seen.get(key, 0)
            seen[key] = repeat + 1
            ident = chunk_id(source, title, body, repeat)
            line += joined.count("\n", at, first)
            start_line = line
            line += joined.count("\n", first, end)
            at = end
            last_line = line - (end <= len(joined))  # the last line's index
            if numbers is not None:
                start_line, last_line = numbers[start_line], numbers[last_line]
            chunks.append(Chunk(ident, source, title, start_line + 1, last_line + 1, body))
    return chunks
