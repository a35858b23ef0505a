"""Pure text work for the file tools: line-numbered ranges, sed edits, hashes (no I/O here).

Lines are split on ``\\n`` only, everywhere (``read_file``, ``grep``, ``sed``), so line numbers
agree between tools. A ``\\r`` before the newline is hidden in displayed lines and reported.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from ...exceptions import WorkspaceError

__all__ = ["ReadLimits", "apply_sed", "count_lines", "digest", "is_binary", "render_range"]

_BINARY_PROBE = 8192


@dataclass(frozen=True, slots=True)
class ReadLimits:
    """Bounds on reading and editing files."""

    whole_lines: int = 2000
    """Files with more lines need a line range."""
    whole_bytes: int = 256 * 1024
    """Files larger than this need a line range."""
    lines_per_read: int = 2000
    bytes_per_read: int = 100 * 1024
    max_file_bytes: int = 64 * 1024 * 1024
    """Files larger than this are refused by read_file and sed."""
    sed_shown_lines: int = 100


def digest(data: bytes) -> bytes:
    """The content hash used for stale-write detection."""
    return hashlib.sha256(data).digest()


def _size(n: int) -> str:
    return f"{n} bytes" if n < 1024 else f"{n // 1024} KB"


def is_binary(data: bytes) -> bool:
    """A NUL byte in the first 8 KB marks a binary file."""
    return b"\x00" in data[:_BINARY_PROBE]


def count_lines(data: bytes) -> int:
    """Number of lines; a final line without a newline counts."""
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _check_range(shown: str, start: int, end: int | None, total: int) -> None:
    if total == 0:
        raise WorkspaceError(f"{shown!r} is empty (0 lines); there is no line {start}")
    if start > total:
        raise WorkspaceError(
            f"start_line {start} is past the end of {shown!r}, which has {total} lines"
        )
    if end is not None and end < start:
        raise WorkspaceError(f"end_line ({end}) must not be smaller than start_line ({start})")


def _numbered(first: int, lines: list[str], budget: int) -> tuple[list[str], int]:
    """Number ``lines`` from ``first`` within ``budget`` characters; return them and the count."""
    out: list[str] = []
    for i, line in enumerate(lines):
        line = line.removesuffix("\r")
        if len(line) >= budget:
            if out:
                break
            line = f"{line[:budget]}… [line truncated: it has {len(line)} characters]"
        budget -= len(line) + 1
        out.append(f"{first + i} | {line}")
    return out, len(out)


def render_range(
    data: bytes, shown: str, start: int | None, end: int | None, limits: ReadLimits
) -> str:
    """Render lines ``start``..``end`` (1-based, inclusive) of ``data`` as ``<n> | <text>``.

    Raises:
        WorkspaceError: For a file too large to read without a range, or a range outside it.
    """
    total = count_lines(data)
    if (
        start is None
        and end is None
        and (total > limits.whole_lines or len(data) > limits.whole_bytes)
    ):
        raise WorkspaceError(
            f"{shown!r} has {total} lines ({_size(len(data))}), too large to read at once. "
            f"Call read_file with start_line and end_line (at most {limits.lines_per_read} lines "
            "per call), or use grep to find the lines you need."
        )
    if total == 0 and start is None:
        return f"[{shown}: empty file, 0 lines]"
    first = start or 1
    _check_range(shown, first, end, total)
    last = min(end or total, total, first + limits.lines_per_read - 1)
    pieces = data.split(b"\n", last)[first - 1 : last]
    raw = b"\n".join(pieces)
    notes: list[str] = []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", "replace")
        notes.append("[note: not valid UTF-8; undecodable bytes are shown as U+FFFD]")
    if raw.endswith(b"\r") or b"\r\n" in raw:
        notes.append("[note: CRLF line endings; the \\r before each newline is not shown]")
    lines, shown_count = _numbered(first, text.split("\n"), limits.bytes_per_read)
    shown_last = first + shown_count - 1
    wanted_last = min(end or total, total)
    if shown_last < wanted_last:
        notes.append(
            f"[output stopped after line {shown_last} (at most {limits.lines_per_read} lines / "
            f"{_size(limits.bytes_per_read)} per call); continue with "
            f"start_line={shown_last + 1}]"
        )
    header = f"[{shown}: lines {first}-{shown_last} of {total}]"
    return "\n".join([header, *lines, *notes])


def _display(text: str) -> str:
    """Show surrogate-escaped bytes of a non-UTF-8 file as U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _sed_report(
    shown: str, start: int, end: int, count: int, new_lines: list[str], limit: int
) -> str:
    new_end = start + len(new_lines) - 1
    parts = [
        f"Replaced {count} occurrence(s) in lines {start}-{end} of {shown}. "
        f"Lines {start}-{new_end} now read:"
    ]
    parts += [
        f"{start + i} | {_display(line).removesuffix(chr(13))}"
        for i, line in enumerate(new_lines[:limit])
    ]
    if len(new_lines) > limit:
        parts.append(f"[… {len(new_lines) - limit} more changed line(s) not shown]")
    if new_end != end:
        parts.append(f"[lines after {end} moved by {new_end - end:+d}; re-read before editing]")
    return "\n".join(parts)


def apply_sed(
    data: bytes,
    shown: str,
    span: tuple[int, int],
    pattern: str,
    new_string: str,
    limits: ReadLimits,
) -> tuple[bytes | None, str]:
    """Replace every match of ``pattern`` inside lines ``span`` (1-based, inclusive).

    ``new_string`` is inserted literally. Bytes that are not valid UTF-8 round-trip unchanged.

    Returns:
        The new content (``None`` when nothing matched) and the report for the model.

    Raises:
        WorkspaceError: For an invalid regex, a bad range or an unencodable ``new_string``.
    """
    start, end = span
    try:
        rx = re.compile(pattern, re.MULTILINE)
    except re.error as exc:
        raise WorkspaceError(f"invalid regular expression {pattern!r}: {exc}") from None
    total = count_lines(data)
    _check_range(shown, start, end, total)
    end = min(end, total)
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    segment = "\n".join(lines[start - 1 : end])
    replaced, count = rx.subn(lambda _m: new_string, segment)
    if count == 0:
        return None, f"No match for /{pattern}/ in lines {start}-{end} of {shown}; file unchanged."
    new_lines = replaced.split("\n")
    lines[start - 1 : end] = new_lines
    try:
        new_data = "\n".join(lines).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise WorkspaceError("new_string has characters that cannot be encoded as UTF-8") from None
    return new_data, _sed_report(shown, start, end, count, new_lines, limits.sed_shown_lines)
