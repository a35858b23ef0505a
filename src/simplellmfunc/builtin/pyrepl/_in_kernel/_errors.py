"""Kernel side: structured error details that point at the user's code.

Runs inside the kernel (standard library only). A frame is user code when IPython compiled it from
a cell (``shell.compile._filename_map``); everything else (IPython, libraries) is framework or
library code. The location reported is the innermost user frame: the failing line itself, or the
user's line that called into the library where the error happened.
"""

from __future__ import annotations

import linecache
import traceback
from typing import Any

__all__ = ["describe"]

_MAX_USER_FRAMES = 12
_LIBRARY_TAIL = 3


def _cells(shell: Any) -> dict[str, int]:
    mapping = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return mapping if isinstance(mapping, dict) else {}


def _is_user(filename: str, cells: dict[str, int]) -> bool:
    return filename in cells or filename.startswith("<ipython-input-")


def _char_column(line: str, byte_offset: int | None) -> int | None:
    """Turn a UTF-8 byte offset (what code positions use) into a 0-based character column."""
    if byte_offset is None:
        return None
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _pointer(line: str, start: int | None, end: int | None) -> str:
    if start is None:
        return ""
    stop = end if end is not None and end > start else len(line.rstrip())
    width = max(1, min(stop, len(line.rstrip())) - start)
    return " " * start + "^" * width


def _type_name(exc: BaseException) -> str:
    cls = type(exc)
    if cls.__module__ in ("builtins", "__main__"):
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _where(frame: traceback.FrameSummary, cells: dict[str, int], current: int | None) -> str:
    cell = cells.get(frame.filename)
    where = f"line {frame.lineno}"
    if cell is not None and cell != current:
        where += f" of execution [{cell}]"
    elif cell is None and not frame.filename.startswith("<"):
        where = f'File "{frame.filename}", {where}'
    if frame.name != "<module>":
        where += f", in {frame.name}"
    return where


def _frame_text(frame: traceback.FrameSummary, cells: dict[str, int], current: int | None) -> str:
    source = (frame.line or "").strip()
    text = f"  {_where(frame, cells, current)}"
    return f"{text}\n    {source}" if source else text


def _user_traceback(
    frames: list[traceback.FrameSummary],
    user: list[int],
    cells: dict[str, int],
    current: int | None,
    headline: str,
) -> str:
    shown = user
    lines = ["Traceback (user code, most recent call last):"]
    if len(shown) > _MAX_USER_FRAMES:
        head, tail = shown[:3], shown[-(_MAX_USER_FRAMES - 3) :]
        omitted = len(shown) - len(head) - len(tail)
        lines += [_frame_text(frames[i], cells, current) for i in head]
        lines.append(f"  ... {omitted} more frames of user code ...")
        lines += [_frame_text(frames[i], cells, current) for i in tail]
    else:
        lines += [_frame_text(frames[i], cells, current) for i in shown]
    library = frames[user[-1] + 1 :] if user else frames
    if library:
        if len(library) > _LIBRARY_TAIL:
            lines.append(f"  ... {len(library) - _LIBRARY_TAIL} frames inside libraries ...")
        lines += [_frame_text(f, cells, current) for f in library[-_LIBRARY_TAIL:]]
    lines.append(headline)
    return "\n".join(lines)


def _chained(exc: BaseException) -> str | None:
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    if cause is None:
        return None
    return f"{_type_name(cause)}: {cause}"


def _as_written(details: dict[str, Any], raw_cell: str | None, current: int | None) -> None:
    """Show the line as the user wrote it when IPython rewrote it (magics, ``!cmd``).

    Positions refer to the rewritten line, so they are dropped rather than misplaced.
    """
    line = details.get("line")
    if not raw_cell or not line or details.get("execution") not in (None, current):
        return
    lines = raw_cell.splitlines()
    if line > len(lines) or lines[line - 1] == details.get("snippet"):
        return
    details.update(snippet=lines[line - 1], pointer=None, column=None)


def _runtime(exc: BaseException, shell: Any, current: int | None) -> dict[str, Any]:
    cells = _cells(shell)
    frames = list(traceback.extract_tb(exc.__traceback__))
    first_user = next((i for i, f in enumerate(frames) if _is_user(f.filename, cells)), None)
    if first_user is not None:
        # Frames before the first user frame belong to IPython's machinery.
        frames = frames[first_user:]
    user = [i for i, f in enumerate(frames) if _is_user(f.filename, cells)]
    headline = f"{_type_name(exc)}: {exc}" if str(exc) else _type_name(exc)
    details: dict[str, Any] = {
        "error_type": _type_name(exc),
        "message": str(exc),
        "line": None,
        "column": None,
        "snippet": None,
        "pointer": None,
        "function": None,
        "execution": None,
        "in_library": bool(frames) and (not user or user[-1] != len(frames) - 1),
        "caused_by": _chained(exc),
        "user_traceback": _user_traceback(frames, user, cells, current, headline),
    }
    if user:
        frame = frames[user[-1]]
        raw = linecache.getline(frame.filename, frame.lineno or 0).rstrip("\n")
        start = _char_column(raw, getattr(frame, "colno", None))
        same_line = getattr(frame, "end_lineno", None) in (None, frame.lineno)
        end = _char_column(raw, getattr(frame, "end_colno", None)) if same_line else None
        details.update(
            line=frame.lineno,
            column=None if start is None else start + 1,
            snippet=raw or None,
            pointer=_pointer(raw, start, end) if raw else None,
            function=None if frame.name == "<module>" else frame.name,
            execution=cells.get(frame.filename),
        )
    return details


def _syntax(exc: SyntaxError, shell: Any, current: int | None) -> dict[str, Any]:
    text = (exc.text or "").rstrip("\n")
    start = None if exc.offset is None else max(exc.offset - 1, 0)
    end_line = getattr(exc, "end_lineno", None)
    end_offset = getattr(exc, "end_offset", None)
    end = end_offset - 1 if end_offset and end_line in (None, exc.lineno) else None
    message = exc.msg or str(exc)
    headline = f"{_type_name(exc)}: {message}"
    where = f"  line {exc.lineno}" if exc.lineno else "  (unknown line)"
    pointer = _pointer(text, start, end) if text else None
    block = [where, f"    {text}"] if text else [where]
    if pointer:
        block.append(f"    {pointer}")
    return {
        "error_type": _type_name(exc),
        "message": message,
        "line": exc.lineno,
        "column": None if start is None else start + 1,
        "snippet": text or None,
        "pointer": pointer,
        "function": None,
        "execution": current,
        "in_library": False,
        "caused_by": None,
        "user_traceback": "\n".join(["Traceback (user code, most recent call last):", *block])
        + f"\n{headline}",
    }


def describe(
    exc: BaseException,
    shell: Any,
    *,
    before_exec: bool,
    current: int | None,
    raw_cell: str | None = None,
) -> dict[str, Any]:
    """Return the structured error details of ``exc`` raised by the current cell.

    Args:
        exc: The exception.
        shell: The IPython shell.
        before_exec: Whether it was raised while compiling the cell (syntax errors).
        current: The execution count of the current cell.
        raw_cell: The cell as the user wrote it (before IPython's transformations).
    """
    cells = _cells(shell)
    if isinstance(exc, SyntaxError) and (before_exec or _is_user(exc.filename or "", cells)):
        details = _syntax(exc, shell, current)
    else:
        details = _runtime(exc, shell, current)
    _as_written(details, raw_cell, current)
    details["summary"] = _summary(details, current)
    preset = getattr(exc, "name", None) if isinstance(exc, ImportError) else None
    if preset in _PRESET:
        details["summary"] += (
            f"\n  hint: {preset!r} cannot be imported: it is not a module but a name already "
            f"defined in every cell; use it directly ({_PRESET[preset]})."
        )
    return details


# Names the kernel defines in every cell, which models try to import.
_PRESET = {
    "runtime": "runtime.list_primitives(), runtime.<namespace>.<name>(...)",
    "self_reference": "self_reference.memory[key]...",
}


def _summary(details: dict[str, Any], current: int | None) -> str:
    headline = str(details["error_type"])
    if details["message"]:
        headline += f": {details['message']}"
    if details["line"] is None:
        return headline
    where = f"line {details['line']}"
    if details["column"] is not None:
        where += f", column {details['column']}"
    execution = details.get("execution")
    if execution is not None and execution != current:
        where += f" of the code run in execution [{execution}]"
    if details.get("function"):
        where += f", in {details['function']}"
    prefix = "called from " if details.get("in_library") else "at "
    lines = [headline, f"  {prefix}{where}:"]
    if details["snippet"]:
        lines.append(f"    {details['snippet']}")
        if details["pointer"]:
            lines.append(f"    {details['pointer']}")
    if details.get("caused_by"):
        lines.append(f"  (raised while handling {details['caused_by']})")
    return "\n".join(lines)
