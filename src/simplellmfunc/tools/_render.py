"""What the model sees of a tool call: results as text and images, errors as short text.

:func:`render_result` is synchronous and may block: it reads image files (``ImgPath`` becomes a
data URL), counts tokens and, with ``too_long_to_file``, writes a file. Code on the event loop
awaits :func:`render_result_async`, which runs it in a worker thread.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
import enum
import functools
import json
import re
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath

import anyio.to_thread
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from .._content import ImgPath, ImgUrl, Text
from .._persist import write_file_atomic
from ..exceptions import ToolSignal
from ..providers import count_text_tokens
from ._schema import ArgumentsError

__all__ = [
    "RenderedResult",
    "default_spill_dir",
    "render_error",
    "render_result",
    "render_result_async",
    "render_unknown_tool",
]

ARGUMENTS_HINT = "Check the tool's parameter schema and call it again."
_SPILL_DIR_NAME = "simplellmfunc-tool-output"
_CHARS_PER_TOKEN = 4  # the first guess of how many characters fit a token
# Beyond this many characters per budget token, text is over budget without counting: no real
# text averages that many characters per token, and counting megabytes would cost seconds.
_UNCOUNTED_CHARS_PER_TOKEN = 16
_ERROR_CHARS = 4000
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")

Image = ImgUrl | ImgPath


@dataclass(frozen=True, slots=True)
class RenderedResult:
    """A tool result as the model receives it.

    Attributes:
        text: The text part (the whole result, or its head and tail around a marker).
        images: Images for a multimodal tool result.
        truncated: Whether the text was cut to the token budget.
        spill_path: The file holding the full text, when it was written to one.
    """

    text: str
    images: tuple[ImgUrl, ...] = ()
    truncated: bool = False
    spill_path: str | None = None


def default_spill_dir() -> Path:
    """Where oversized results go unless a ``spill_dir`` is given (created on first use)."""
    return Path(tempfile.gettempdir()) / _SPILL_DIR_NAME


def render_result(
    value: object,
    *,
    budget_tokens: int = 8000,
    too_long_to_file: bool = False,
    spill_dir: Path | None = None,
    tool_name: str = "tool",
    model: str = "",
) -> RenderedResult:
    """Render a raw tool result for the model (blocking: see the module docstring).

    ``str`` is kept as-is; pydantic models, dataclasses and JSON values become compact JSON
    (paths, datetimes, enums, sets and nested models are converted); ``ImgPath`` / ``ImgUrl``, a
    list of images, or a tuple ``(text, image)`` / ``(text, [images])`` make a multimodal result
    (image files become data URLs). Text over ``budget_tokens`` (counted for ``model``; ``<= 0``
    means no limit) keeps its head and tail around a marker; with ``too_long_to_file`` the full
    text is first written to a new file in ``spill_dir`` (default :func:`default_spill_dir`) and
    the marker gives its path. A file that cannot be written is reported in the marker instead.
    """
    text, images = _split(value)
    urls, problems = _image_urls(images)
    text = "\n".join([text, *problems]) if problems else text
    if budget_tokens <= 0 or not _over_budget(text, budget_tokens, model):
        return RenderedResult(text, urls)
    spill_path: str | None = None
    note = ""
    if too_long_to_file:
        try:
            spill_path = _spill(text, spill_dir or default_spill_dir(), tool_name)
            note = f"; the full output ({len(text)} characters) is in the file {spill_path}"
        except (OSError, ValueError) as exc:
            note = f"; could not save the full output: {type(exc).__name__}: {exc}"
    # The marker's own tokens come out of the budget (its number only shrinks later); a path
    # too long to leave half the budget for the text is cut to the file's name.
    allowed = _room(budget_tokens, len(text), note, model)
    if spill_path is not None and allowed < budget_tokens // 2:
        note = f"; the full output ({len(text)} characters) is in the file {Path(spill_path).name}"
        allowed = _room(budget_tokens, len(text), note, model)
    head, tail = _head_and_tail(text, max(allowed, 1), model)
    marker = _marker(len(text) - len(head) - len(tail), note)
    return RenderedResult(head + marker + tail, urls, truncated=True, spill_path=spill_path)


def _room(budget_tokens: int, length: int, note: str, model: str) -> int:
    # Two tokens spare: a token can merge across the head/marker/tail seams.
    return budget_tokens - count_text_tokens(_marker(length, note), model) - 2


def _marker(omitted: int, note: str) -> str:
    return f"\n…[truncated: {omitted} characters omitted{note}]…\n"


async def render_result_async(
    value: object,
    *,
    budget_tokens: int = 8000,
    too_long_to_file: bool = False,
    spill_dir: Path | None = None,
    tool_name: str = "tool",
    model: str = "",
) -> RenderedResult:
    """:func:`render_result` in a worker thread, for callers on the event loop."""
    call = functools.partial(
        render_result,
        value,
        budget_tokens=budget_tokens,
        too_long_to_file=too_long_to_file,
        spill_dir=spill_dir,
        tool_name=tool_name,
        model=model,
    )
    return await anyio.to_thread.run_sync(call)


def render_error(exc: BaseException) -> str:
    """The model-facing text of a failed tool call: ``"Error: <Type>: <message>"``.

    No traceback. An :class:`ArgumentsError` reads as its message plus a hint to check the
    schema; a :class:`~simplellmfunc.exceptions.ToolSignal` (``ToolRetry``) as its message alone,
    since that text is written for the model.
    """
    if isinstance(exc, ArgumentsError):
        text = f"Error: {exc}\n{ARGUMENTS_HINT}"
    elif isinstance(exc, ToolSignal):
        text = str(exc)
    else:
        text = f"Error: {_describe_exception(exc)}"
    return _clip(text, _ERROR_CHARS)


def render_unknown_tool(name: str, available: Sequence[str]) -> str:
    """The model-facing text of a call to a tool that does not exist, naming the real ones."""
    names = list(dict.fromkeys(available))
    text = f"Error: there is no tool named {_clip(name, 100)!r}."
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        text += f" Did you mean {close[0]!r}?"
    if names:
        return f"{text} Available tools: {', '.join(names)}."
    return f"{text} No tools are available."


def _describe_exception(exc: BaseException) -> str:
    message = str(exc).strip()
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if isinstance(exc, BaseExceptionGroup):
        text += ": " + "; ".join(_describe_exception(e) for e in exc.exceptions[:5])
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- values → text and images -------------------------------------------------------------


def _split(value: object) -> tuple[str, list[Image]]:
    """Separate a raw result into its text and its images."""
    if isinstance(value, str):
        return str.__str__(value), []  # a str subclass (str enums) as its plain value
    images = _as_images(value)
    if images:
        return _image_note(len(images)), images
    if isinstance(value, tuple) and len(value) >= 2 and isinstance(value[0], str):
        parts = [[] if isinstance(v, list | tuple) and not v else _as_images(v) for v in value[1:]]
        if all(p is not None for p in parts):
            found = [image for part in parts for image in part or ()]
            return str.__str__(value[0]) or _image_note(len(found)), found
    return _to_text(value), []


def _as_images(value: object) -> list[Image] | None:
    """``value`` as a list of images: one image, or a non-empty list / tuple of images."""
    if isinstance(value, ImgUrl | ImgPath):
        return [value]
    if isinstance(value, list | tuple) and value and all(isinstance(v, Image) for v in value):
        return list(value)
    return None


def _image_note(count: int) -> str:
    return "image returned" if count == 1 else f"{count} images returned"


def _image_urls(images: list[Image]) -> tuple[tuple[ImgUrl, ...], list[str]]:
    """Turn images into URLs (reading image files); files that vanished become notes."""
    urls: list[ImgUrl] = []
    problems: list[str] = []
    for image in images:
        if isinstance(image, ImgUrl):
            urls.append(image)
            continue
        try:
            urls.append(image.to_img_url())
        except OSError as exc:
            problems.append(f"[image unavailable: {image.path}: {type(exc).__name__}]")
    return tuple(urls), problems


def _to_text(value: object) -> str:
    if isinstance(value, BaseModel):
        try:
            return value.model_dump_json()
        except PydanticSerializationError:
            return _dumps(value.model_dump())
    if isinstance(value, dict | list | tuple | int | float | bool | None):
        return _dumps(value)
    converted = _json_default(value)
    return converted if isinstance(converted, str) else _dumps(converted)


def _dumps(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError, RecursionError):  # unsortable keys, cycles: still show it
        return repr(value)


def _json_default(obj: object) -> object:
    """Convert what :mod:`json` cannot encode into something it can (``str`` as last resort)."""
    if isinstance(obj, BaseModel):
        try:
            return obj.model_dump(mode="json")
        except PydanticSerializationError:
            return obj.model_dump()
    if isinstance(obj, Text):
        return obj.text
    if isinstance(obj, ImgPath):
        return str(obj.path)
    if isinstance(obj, ImgUrl):
        return "<image data URL>" if obj.url.startswith("data:") else obj.url
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # Like dataclasses.asdict, one level at a time: json recurses, nothing is deep-copied.
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    return _plain_default(obj)


def _plain_default(obj: object) -> object:
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, dt.datetime | dt.date | dt.time):
        return obj.isoformat()
    if isinstance(obj, dt.timedelta):
        return obj.total_seconds()
    if isinstance(obj, set | frozenset):
        try:
            return sorted(obj)
        except TypeError:
            return list(obj)
    if isinstance(obj, bytes | bytearray):
        return bytes(obj).decode("utf-8", errors="replace")
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, Iterable) and not isinstance(obj, str):
        return list(obj)
    return str(obj)


# --- the token budget -----------------------------------------------------------------------


def _over_budget(text: str, budget: int, model: str) -> bool:
    if len(text) * 4 <= budget:  # a token covers at least one UTF-8 byte, a character <= 4
        return False
    if len(text) > budget * _UNCOUNTED_CHARS_PER_TOKEN:
        return True
    return count_text_tokens(text, model) > budget


def _head_and_tail(text: str, allowed: int, model: str) -> tuple[str, str]:
    """The start and end of ``text`` that together fit in ``allowed`` tokens."""
    keep = min(allowed * _CHARS_PER_TOKEN, len(text) - 1)
    head, tail = _cut(text, keep)
    for _ in range(4):  # shrink by the measured characters per token; converges in 1-2 steps
        used = count_text_tokens(head, model) + count_text_tokens(tail, model)
        if used <= allowed or keep <= 1:
            break
        keep = max(1, min(keep - 1, int((len(head) + len(tail)) * allowed / used)))
        head, tail = _cut(text, keep)
    return head, tail


def _cut(text: str, keep: int) -> tuple[str, str]:
    """Head and tail of about ``keep`` characters in total, cut at line ends when one is near."""
    tail_size = keep // 2
    head = text[: keep - tail_size]
    tail = text[len(text) - tail_size :] if tail_size else ""
    newline = head.rfind("\n", (len(head) * 4) // 5)
    if newline > 0:
        head = head[: newline + 1]
    newline = tail.find("\n", 0, len(tail) // 5)
    if newline >= 0:
        tail = tail[newline + 1 :]
    return head, tail


def _spill(text: str, directory: Path, tool_name: str) -> str:
    """Write ``text`` to a new private file in ``directory``; return its absolute path.

    The write is atomic (``_persist``), so the path the model is given never names a
    half-written file.
    """
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    safe = _SAFE_NAME.sub("_", tool_name)[:64] or "tool"
    final = directory / f"{safe}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:12]}.txt"
    write_file_atomic(final, text, mode=0o600)
    return str(final.absolute())
