"""What the model reads of an execution's output, and the files that hold the rest.

When the output exceeds the token budget, each stream over its share keeps its head and its tail
(stderr leans to the tail: the end of a traceback or a log is what matters), and the marker in
between says how much was left out and, truthfully, where it can be read: the whole output, the
first characters of it (the file cap), or nowhere (it could not be saved).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import anyio

from ._capture import StreamCapture

__all__ = ["CHARS_PER_TOKEN", "StreamView", "cut_stream", "present_streams", "split_budget"]

#: A rough characters-per-token ratio, good enough to size output against a token budget.
CHARS_PER_TOKEN = 4
#: How much of its budget each stream gives to its tail.
_TAIL_SHARE = {"stdout": 0.5, "stderr": 0.8}

#: Writes a whole text to a file; False when it could not.
SaveText = Callable[[str, str], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class StreamView:
    """What the model reads of one stream; ``file`` holds (some of) the rest when it was cut."""

    text: str
    file: str | None = None


def split_budget(stdout_len: int, stderr_len: int, budget_chars: int) -> tuple[int, int]:
    """Share ``budget_chars`` between stdout and stderr (each gets at least what it needs)."""
    if stdout_len + stderr_len <= budget_chars:
        return stdout_len, stderr_len
    half = budget_chars // 2
    if stderr_len <= half:
        return budget_chars - stderr_len, stderr_len
    if stdout_len <= half:
        return stdout_len, budget_chars - stdout_len
    return half, budget_chars - half


def cut_stream(
    capture: StreamCapture, budget_chars: int, *, tail_share: float
) -> tuple[str, str] | None:
    """The head and tail the model reads of ``capture``, or None when it reads all of it."""
    head_kept, tail_kept = capture.parts()
    complete = capture.dropped_chars == 0
    if complete and capture.total_chars <= budget_chars:
        return None
    if complete:
        head_kept = tail_kept = head_kept + tail_kept
    tail_len = min(int(budget_chars * tail_share), len(tail_kept))
    head_len = budget_chars - tail_len
    head = _cut_at_line(head_kept[:head_len], from_end=False)
    tail = _cut_at_line(tail_kept[len(tail_kept) - tail_len :], from_end=True) if tail_len else ""
    return head, tail


async def present_streams(
    captures: Mapping[str, StreamCapture],
    budget_chars: int,
    paths: Mapping[str, str],
    save_text: SaveText,
) -> dict[str, StreamView]:
    """Fit the streams to the budget, save what was cut, and say where it went.

    Spool files that end up unused are removed (also when this is cancelled).
    """
    stdout, stderr = captures["stdout"], captures["stderr"]
    shares = dict(
        zip(
            ("stdout", "stderr"),
            split_budget(stdout.total_chars, stderr.total_chars, budget_chars),
            strict=True,
        )
    )
    views: dict[str, StreamView] = {}
    if all(
        capture.spool is None or not capture.spool.started for capture in captures.values()
    ) and all(
        capture.total_chars <= shares[name] and capture.dropped_chars == 0
        for name, capture in captures.items()
    ):
        # The usual case: everything fits and no file was started (nothing to save or remove).
        return {name: StreamView(capture.text()) for name, capture in captures.items()}
    kept: set[str] = set()
    try:
        for name, capture in captures.items():
            cut = cut_stream(capture, shares[name], tail_share=_TAIL_SHARE[name])
            if cut is None:
                views[name] = StreamView(capture.text())
                continue
            file, where = await _save(capture, paths[name], save_text)
            if file is not None:
                kept.add(name)
            head, tail = cut
            omitted = capture.total_chars - len(head) - len(tail)
            marker = f"\n[... output truncated: {omitted:,} characters omitted; {where} ...]\n"
            views[name] = StreamView(head + marker + tail, file)
    finally:
        with anyio.CancelScope(shield=True):
            for name, capture in captures.items():
                if name not in kept and capture.spool is not None:
                    await capture.spool.discard()
    return views


async def _save(capture: StreamCapture, path: str, save_text: SaveText) -> tuple[str | None, str]:
    """Save the stream for the model to read: (the file, or None; how the marker says it)."""
    total = capture.total_chars
    spool = capture.spool
    if spool is not None and spool.started:
        if not await spool.keep():
            return None, "the output could not be saved to a file"
        if spool.saved_chars >= total:
            return spool.path, f"the full output ({total:,} characters) is in {spool.path}"
        saved = spool.saved_chars
        return spool.path, f"the first {saved:,} of its {total:,} characters are in {spool.path}"
    if capture.dropped_chars:
        return None, "the middle of the output was not kept"
    if await save_text(path, capture.text()):
        return path, f"the full output ({total:,} characters) is in {path}"
    return None, "the full output could not be saved"


def _cut_at_line(text: str, *, from_end: bool) -> str:
    """Trim a partial line at the cut edge when a line break is near (readability)."""
    if from_end:
        index = text.find("\n")
        return text[index + 1 :] if 0 <= index < 200 else text
    index = text.rfind("\n")
    return text[: index + 1] if index >= len(text) - 200 else text
