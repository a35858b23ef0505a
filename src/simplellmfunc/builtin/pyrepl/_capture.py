"""Output capture with caps, and the budget that decides what the model reads.

A :class:`StreamCapture` keeps at most ``max_chars`` characters of one stream: past that, the
head stays and the tail keeps rolling, so memory is bounded however much a cell prints. When
the output of an execution exceeds the token budget, :func:`fit_output` keeps the head and the
tail (stderr leans to the tail: the end of a traceback or a log is what matters) and the full
captured text goes to a spill file whose path is written into the shortened text.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

__all__ = ["CHARS_PER_TOKEN", "FittedStream", "StreamCapture", "fit_stream", "split_budget"]

#: A rough characters-per-token ratio, good enough to size output against a token budget.
CHARS_PER_TOKEN = 4


class StreamCapture:
    """Collects one output stream, keeping at most ``max_chars`` characters (head + tail)."""

    def __init__(self, max_chars: int) -> None:
        self._max = max(max_chars, 2)
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self.total_chars = 0

    def write(self, text: str) -> None:
        """Append ``text``."""
        if not text:
            return
        self.total_chars += len(text)
        half = self._max // 2
        if self._head_size < half:
            room = half - self._head_size
            self._head.append(text[:room])
            self._head_size += min(room, len(text))
            text = text[room:]
            if not text:
                return
        self._tail.append(text)
        self._tail_size += len(text)
        limit = self._max - half
        while self._tail and self._tail_size - len(self._tail[0]) >= limit:
            self._tail_size -= len(self._tail.popleft())

    def _kept(self) -> tuple[str, str]:
        tail = "".join(self._tail)
        limit = self._max - self._max // 2
        return "".join(self._head), tail[-limit:] if len(tail) > limit else tail

    @property
    def dropped_chars(self) -> int:
        """Characters that were not kept (the middle of a huge output)."""
        head, tail = self._kept()
        return self.total_chars - len(head) - len(tail)

    def text(self) -> str:
        """The kept text, with a marker where the middle was dropped."""
        head, tail = self._kept()
        dropped = self.total_chars - len(head) - len(tail)
        if dropped <= 0:
            return head + tail
        return f"{head}\n[... {dropped:,} characters not kept in memory ...]\n{tail}"


@dataclass(frozen=True, slots=True)
class FittedStream:
    """What the model reads of one stream; ``spill`` is the full text when it was cut."""

    text: str
    spill: str | None


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


def fit_stream(text: str, budget_chars: int, *, tail_share: float, spill_path: str) -> FittedStream:
    """Cut ``text`` to about ``budget_chars`` keeping head and tail, with a marker naming the file.

    The caller writes ``spill`` (the full text) to ``spill_path`` when it is not ``None``.
    """
    if len(text) <= budget_chars:
        return FittedStream(text, None)
    tail_len = int(budget_chars * tail_share)
    head_len = budget_chars - tail_len
    head = _cut_at_line(text[:head_len], from_end=False)
    tail = _cut_at_line(text[len(text) - tail_len :], from_end=True) if tail_len else ""
    omitted = len(text) - len(head) - len(tail)
    marker = (
        f"\n[... output truncated: {omitted:,} characters omitted; "
        f"the full output is in {spill_path} ...]\n"
    )
    return FittedStream(head + marker + tail, text)


def _cut_at_line(text: str, *, from_end: bool) -> str:
    """Trim a partial line at the cut edge when a line break is near (readability)."""
    if from_end:
        index = text.find("\n")
        return text[index + 1 :] if 0 <= index < 200 else text
    index = text.rfind("\n")
    return text[: index + 1] if index >= len(text) - 200 else text
