"""Kernel side: output of background threads, labelled with the execution that started them.

Runs inside the kernel process (standard library only). ipykernel sends what a background thread
prints with the header of whatever request is current, so the output of a thread started by one
execution turned up, unmarked, in a later execution's stdout; printed between executions, it
went to a request nobody was reading any more and was lost.

Here every thread remembers the execution it was started in (a thread started by a background
thread inherits that thread's execution), and so does every work item submitted to a
``concurrent.futures`` thread pool (``asyncio.to_thread`` included), so that a pool created by an
earlier execution works for the current one. Output of the running execution's own threads is
left alone. Output of an earlier execution's thread is labelled line by line
(``[thread 'name' from execution [3]] ...``) and kept in the result of the execution during which
it was printed; printed between executions, it is held (up to a bound) and written at the start
of the next one. fd-level output (subprocesses) cannot be attributed and is not labelled.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["begin", "end", "install", "route"]

_MAX_HELD_CHARS = 1_000_000
_ATTRIBUTE = "_simplellmfunc_execution"


class _Execution:
    """One user execution; threads and work items keep a reference to the one they serve."""

    __slots__ = ("number",)

    def __init__(self, number: int) -> None:
        self.number = number


_LOCK = threading.Lock()
_LOCAL = threading.local()
_RUNNING: list[_Execution | None] = [None]
_HELD: list[tuple[Any, str]] = []
_HELD_CHARS = [0]
_DROPPED = [0]
_INSTALLED = [False]


def _origin() -> _Execution | None:
    """The execution the calling thread works for (None: unknown, or no execution running)."""
    override = getattr(_LOCAL, "origin", None)
    if isinstance(override, _Execution):
        return override
    thread = threading.current_thread()
    if thread is threading.main_thread():
        return _RUNNING[0]
    value = getattr(thread, _ATTRIBUTE, None)
    return value if isinstance(value, _Execution) else None


def _patch_thread_start() -> None:
    start = threading.Thread.start

    def patched(self: threading.Thread) -> None:
        try:
            setattr(self, _ATTRIBUTE, _origin())
        except AttributeError:  # a subclass with __slots__ and no __dict__: stays unattributed
            pass
        start(self)

    threading.Thread.start = patched  # type: ignore[method-assign]


def _patch_work_items() -> None:
    try:
        from concurrent.futures import thread as pool_module

        item_class: Any = pool_module._WorkItem
    except (ImportError, AttributeError):
        return
    init, run = item_class.__init__, item_class.run

    def patched_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.simplellmfunc_execution = _origin()

    def patched_run(self: Any, *args: Any, **kwargs: Any) -> Any:
        previous = getattr(_LOCAL, "origin", None)
        _LOCAL.origin = getattr(self, "simplellmfunc_execution", None)
        try:
            return run(self, *args, **kwargs)
        finally:
            _LOCAL.origin = previous

    item_class.__init__ = patched_init
    item_class.run = patched_run


def install() -> None:
    """Start attributing threads and pool work items to executions (once per process)."""
    if _INSTALLED[0]:
        return
    _INSTALLED[0] = True
    _patch_thread_start()
    _patch_work_items()


def _label(text: str, origin: _Execution) -> str:
    name = threading.current_thread().name
    prefix = f"[thread {name!r} from execution [{origin.number}]] "
    out: list[str] = []
    lines = text.split("\n")
    for index, line in enumerate(lines):
        piece = line if index == len(lines) - 1 else line + "\n"
        if not piece:
            continue
        if getattr(_LOCAL, "line_start", True):
            out.append(prefix)
        out.append(piece)
        _LOCAL.line_start = piece.endswith("\n")
    return "".join(out)


def route(stream: Any, text: str) -> str | None:
    """What to write for ``text`` printed by the calling thread (None: held for later)."""
    if not text or threading.current_thread() is threading.main_thread():
        return text
    origin = _origin()
    if origin is None:
        return text
    with _LOCK:
        running = _RUNNING[0]
        if running is origin:
            return text
        labelled = _label(text, origin)
        if running is not None:
            return labelled
        room = _MAX_HELD_CHARS - _HELD_CHARS[0]
        kept = labelled[: max(room, 0)]
        _DROPPED[0] += len(labelled) - len(kept)
        if kept:
            _HELD.append((stream, kept))
            _HELD_CHARS[0] += len(kept)
        return None


def begin(number: int, write: Callable[[Any, str], Any]) -> None:
    """An execution starts: write what background threads printed since the last one.

    ``number`` is its execution count as far as known now; :func:`end` corrects it (IPython
    versions differ on whether the count has been advanced when the start hooks run).
    """
    with _LOCK:
        _RUNNING[0] = _Execution(number)
        held = _HELD[:]
        dropped = _DROPPED[0]
        _HELD.clear()
        _HELD_CHARS[0] = _DROPPED[0] = 0
    for stream, text in held:
        write(stream, text)
    if dropped and held:
        note = f"[... {dropped:,} more characters of background thread output were dropped ...]\n"
        write(held[-1][0], note)


def end(number: int | None) -> None:
    """The running execution (number ``number``) finished: later thread output is held."""
    with _LOCK:
        running, _RUNNING[0] = _RUNNING[0], None
        if running is not None and number is not None:
            running.number = number
