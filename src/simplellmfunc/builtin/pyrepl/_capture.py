"""Output capture: bounded in memory, complete on disk.

A :class:`StreamCapture` keeps at most ``max_chars`` characters of one stream in memory: past
that, the head stays and the tail keeps rolling, so memory is bounded however much a cell prints.
With a :class:`Spool`, the stream is also written to a file while it streams, from the moment it
outgrows memory (an output that fits in memory is still whole there, and is written out after the
execution if the model cannot read all of it). The file is capped too (``max_chars`` of the
spool); what the model is told about it (``_output``) says how much it holds.

The file is written under ``<path>.part`` and renamed to ``path`` only when it is kept, so the
name given to the model never holds a partial output, and an output nobody needs is removed.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from typing import TextIO

import anyio
import anyio.to_thread

__all__ = ["Spool", "StreamCapture"]

#: Characters gathered in memory before they are written to the spool file in one go.
_CHUNK_CHARS = 1 << 20


class Spool:
    """The output of one stream on disk, written in chunks from a worker thread.

    Args:
        path: Where the file goes when it is kept.
        max_chars: Characters written at most; the rest is counted by the capture, not saved.
    """

    def __init__(self, path: str, max_chars: int) -> None:
        self.path = path
        self._part = path + ".part"
        self._max = max(max_chars, 0)
        self._pending: list[str] = []
        self._pending_chars = 0
        self._file: TextIO | None = None
        self._opened = False  # whether the .part file may exist
        self.started = False
        #: Characters written, or about to be (at most ``max_chars``).
        self.saved_chars = 0
        #: Why the file could not be written, if it could not.
        self.failed: OSError | None = None

    def append(self, text: str) -> bool:
        """Queue ``text`` (up to the cap); whether enough is queued to :meth:`flush` now."""
        self.started = True
        room = self._max - self.saved_chars
        if self.failed is not None or room <= 0 or not text:
            return False
        piece = text[:room]
        self._pending.append(piece)
        self._pending_chars += len(piece)
        self.saved_chars += len(piece)
        return self._pending_chars >= _CHUNK_CHARS

    async def flush(self) -> None:
        """Write what is queued (in a worker thread)."""
        if not self._pending:
            return
        chunk = "".join(self._pending)
        self._pending.clear()
        self._pending_chars = 0
        if self.failed is not None:
            return
        try:
            await anyio.to_thread.run_sync(self._write, chunk)
        except OSError as exc:
            self.failed = exc

    def _write(self, chunk: str) -> None:
        if self._file is None:
            os.makedirs(os.path.dirname(self._part) or ".", exist_ok=True)
            self._opened = True
            self._file = open(self._part, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._file.write(chunk)

    def _close_file(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            handle.close()

    async def keep(self) -> bool:
        """Finish the file and give it its name; False (file removed) if it could not be."""
        with anyio.CancelScope(shield=True):
            await self.flush()
            if self.failed is None:
                try:
                    await anyio.to_thread.run_sync(self._finish)
                except OSError as exc:
                    self.failed = exc
            if self.failed is not None:
                await self.discard()
        return self.failed is None

    def _finish(self) -> None:
        self._close_file()
        os.replace(self._part, self.path)

    async def discard(self) -> None:
        """Drop the file (an output nobody is pointed at); never raises."""

        def drop() -> None:
            with contextlib.suppress(OSError):
                self._close_file()
            with contextlib.suppress(OSError):
                os.unlink(self._part)

        self._pending.clear()
        if not self._opened:
            return  # no file was ever opened (the common case): no worker thread to wake
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(drop)


class StreamCapture:
    """Collects one output stream, keeping at most ``max_chars`` characters (head + tail) in
    memory; with a ``spool``, the stream also goes to a file once it outgrows memory."""

    def __init__(self, max_chars: int, spool: Spool | None = None) -> None:
        self._max = max(max_chars, 2)
        self._head: list[str] = []
        self._head_size = 0
        self._tail: deque[str] = deque()
        self._tail_size = 0
        self.total_chars = 0
        self.spool = spool

    def write(self, text: str) -> bool:
        """Append ``text``; whether the spool wants a :meth:`flush` now."""
        if not text:
            return False
        due = False
        spool = self.spool
        if spool is not None:
            if not spool.started and self.total_chars + len(text) > self._max:
                # Memory is about to drop the middle: until now it holds everything.
                head, tail = self._kept()
                spool.append(head + tail)
            if spool.started:
                due = spool.append(text)
        self._keep(text)
        return due

    async def flush(self) -> None:
        """Write what the spool has queued."""
        if self.spool is not None:
            await self.spool.flush()

    def _keep(self, text: str) -> None:
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
        """Characters not kept in memory (the middle of a huge output)."""
        head, tail = self._kept()
        return self.total_chars - len(head) - len(tail)

    def parts(self) -> tuple[str, str]:
        """The kept head and tail; with nothing dropped, together they are the whole stream."""
        return self._kept()

    def text(self) -> str:
        """The kept text, with a marker where the middle was dropped."""
        head, tail = self._kept()
        dropped = self.total_chars - len(head) - len(tail)
        if dropped <= 0:
            return head + tail
        return f"{head}\n[... {dropped:,} characters not kept in memory ...]\n{tail}"
