"""Kernel side: ordered capture of output written at the file-descriptor level.

Runs inside the kernel process (imported through the ``_simplellmfunc_kernel`` alias package, so
it must only import the standard library). ipykernel redirects fds 1 and 2 into pipes and forwards
what arrives from a watcher thread, which races with ``print``: ``os.write(1, b"x")`` followed by
``print("y")`` can reach the client as ``y`` then ``x``. Here one lock orders every write: before
Python-level text is buffered, whatever already sits in the pipes is forwarded first, and a switch
between stdout and stderr flushes the other stream so that the client sees one ordered sequence.
"""

from __future__ import annotations

import codecs
import os
import select
import struct
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["drain", "install", "restore", "set_router", "unshadow"]

_LOCK = threading.RLock()
_PIPES: list[_Pipe] = []
_STREAMS: list[Any] = []
_ORIGINAL: list[Any] = []
_LAST: list[Any] = [None]
_MASTER_PID = [0]
_ROUTER: list[Callable[[Any, str], str | None]] = []


class _Pipe:
    """One redirected fd: the read end of ipykernel's pipe and the stream it feeds."""

    def __init__(self, stream: Any, write: Callable[[str], Any]) -> None:
        self.stream = stream
        self.fid: int = stream._fid
        self.write = write
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")


def _pending(fid: int) -> int:
    import fcntl
    import termios

    raw = fcntl.ioctl(fid, termios.FIONREAD, b"\0\0\0\0")
    return int(struct.unpack("i", raw)[0])


def _switch_to(stream: Any) -> None:
    """Flush the other stream when output changes stream, so the client sees them in order."""
    last = _LAST[0]
    if last is not None and last is not stream:
        last.flush()
    _LAST[0] = stream


def _drain_one(pipe: _Pipe) -> None:
    size = _pending(pipe.fid)
    if size <= 0:
        return
    text = pipe.decoder.decode(os.read(pipe.fid, size))
    if text:
        _switch_to(pipe.stream)
        pipe.write(text)


def drain() -> None:
    """Forward whatever fd-level output is waiting in the pipes (call from the kernel)."""
    if os.getpid() != _MASTER_PID[0]:
        return
    with _LOCK:
        for pipe in _PIPES:
            _drain_one(pipe)


def _ordered_write(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def write(stream: Any, text: str) -> Any:
        if os.getpid() != _MASTER_PID[0] or stream not in _STREAMS:
            # A forked child shares the pipes' read ends; it must not consume them.
            return original(stream, text)
        routed = _ROUTER[0](stream, text) if _ROUTER and isinstance(text, str) else text
        if routed is None:
            return len(text)
        with _LOCK:
            for pipe in _PIPES:
                _drain_one(pipe)
            _switch_to(stream)
            original(stream, routed)
        return len(text)

    return write


def _pump() -> None:
    """Forward fd-level output that arrives while no Python-level write drains it."""
    fids = {pipe.fid: pipe for pipe in _PIPES}
    while True:
        try:
            ready, _, _ = select.select(list(fids), [], [])
        except (OSError, ValueError):
            return
        with _LOCK:
            for fid in ready:
                _drain_one(fids[fid])


def _stop_ipykernel_watcher(stream: Any) -> bool:
    """Stop ipykernel's own watcher thread for ``stream``; False when that is not possible."""
    thread = getattr(stream, "watch_fd_thread", None)
    fd = getattr(stream, "_original_stdstream_fd", None)
    if not getattr(stream, "_should_watch", False) or thread is None or fd is None:
        return False
    try:
        _pending(stream._fid)
    except (ImportError, OSError):
        return False
    stream._should_watch = False
    # The watcher is blocked in os.read; one byte wakes it up and it exits without forwarding.
    os.write(fd, b"\0")
    thread.join(2.0)
    if thread.is_alive():
        stream._should_watch = True
        return False
    return True


def unshadow() -> None:
    """Drop instance-level ``write`` overrides so the ordered class-level write is used.

    IPython swaps ``stream.write`` on the instance while a cell runs and then assigns the
    original back as an instance attribute, which would hide the class patch; call this before
    each execution (``pre_execute``).
    """
    for stream in _STREAMS:
        vars(stream).pop("write", None)


def set_router(router: Callable[[Any, str], str | None]) -> None:
    """Pass every Python-level write through ``router``: what it returns is written instead
    (``None``: nothing now). Used to label the output of background threads."""
    _ROUTER[:] = [router]


def restore(parent: Any) -> None:
    """Put the kernel's own ``sys.stdout`` / ``sys.stderr`` back (call before each execution).

    A cell that replaced them (``sys.stdout = io.StringIO()``) would otherwise silence every
    later ``print()`` for the kernel's life; a redirection inside one cell is unaffected.
    ``parent`` is the request being executed: ipykernel told the replacement, not the restored
    stream, whose output it belongs to.
    """
    for name, original in zip(("stdout", "stderr"), _ORIGINAL, strict=False):
        if getattr(sys, name) is not original:
            setattr(sys, name, original)
            if parent and hasattr(original, "set_parent"):
                original.set_parent(parent)


def install() -> bool:
    """Order stdout / stderr output and take over ipykernel's fd forwarding.

    The write method is patched on the stream class, not on the instances, because IPython
    temporarily replaces (and then restores) instance attributes while a cell runs. Returns
    whether fd-level output is forwarded by this module (False when ipykernel does not capture
    fds: ``capture_fd_output`` off, an unsupported platform, or unexpected internals).
    """
    if _STREAMS or _ORIGINAL:
        return bool(_PIPES)
    streams = [sys.stdout, sys.stderr]
    _ORIGINAL.extend(streams)
    cls = type(streams[0])
    if type(streams[1]) is not cls:
        return False
    _MASTER_PID[0] = os.getpid()
    for stream in streams:
        if getattr(stream, "_fid", None) is not None and _stop_ipykernel_watcher(stream):
            # Bind the class function: the instance may carry a temporary wrapper.
            _PIPES.append(_Pipe(stream, cls.write.__get__(stream)))
    _STREAMS.extend(streams)
    cls.write = _ordered_write(cls.write)  # type: ignore[method-assign]
    if _PIPES:
        threading.Thread(target=_pump, name="simplellmfunc-fd-pump", daemon=True).start()
    return bool(_PIPES)
