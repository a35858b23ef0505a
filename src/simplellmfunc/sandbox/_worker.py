"""The sandboxed worker: serves Python tool calls inside a sandbox (``python -m`` this module).

It stays up between calls (a warm worker: its imports are paid once) and serves each call in a
child of its own, so each call still starts from the same clean state with fresh limits (CPU
time counts from zero, the address-space limit is the child's own) and a crash or limit hit kills
only that child. The child is forked ahead of the call (a *spare*, forked from the worker's clean
state once the previous call's processes are gone): it sets its limits and filter, then waits for
its one request, so a call pays neither a fork nor an exec (forking a worker that has imported
pydantic costs milliseconds). The worker and its spares are not dumpable (``PR_SET_DUMPABLE`` 0:
no ``ptrace`` and no ``/proc/<pid>/fd`` or ``mem`` for a call's code); a spare never holds another
spare's pipe or files, serves exactly one call and is killed after it.

Requests arrive one per line on stdin as JSON (``module``, ``qualname``, ``main_file``,
``arguments``; ``"op": "load"`` only imports); the worker imports the tool once (in itself, so
the children inherit it), and a spare validates the arguments with the tool's schema, calls it
(awaiting coroutines) and leaves its reply in a file; what the tool prints goes to another. One
JSON line answers each request on the stdout the worker started with::

    {"ok": true, "result": ...}
    {"ok": false, "error": {"type", "message", "builtin", "limit", "violation"}}
    {"ok": false, "exit": <wait status as Popen.returncode>, "output": "<the call's last output>"}

``limit`` names the policy limit an error comes from (``MemoryError``: ``"memory"``; ``EAGAIN``
from fork: ``"processes"``; ``EMFILE``: ``"open_files"``; ``EFBIG``: ``"file_size"``);
``violation`` is set for a refused path (``EACCES``, ``EROFS``, ``EPERM``). ``exit`` says the
child ended without a reply (killed by a limit, crashed).

After each call, whatever the call left running is killed: its process group, and, in a
sandbox's own PID namespace (``--pid-namespace``), every process but the worker, its spares
and the namespace's init; without one (the fallback) the worker is a child subreaper, so what a call
detached (``setsid``, a double fork) is re-parented to it and killed.

Each call child sets its own limits (``--call-memory-mb``: address space on top of what the
worker already maps, its imports are not the call's; ``--call-files``: descriptors on top of
those open) and, with ``--no-processes``, a seccomp filter that refuses new processes and
``execve`` (the strict preset).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import functools
import gc
import importlib
import importlib.util
import inspect
import json
import os
import resource
import signal
import sys
import tempfile
from typing import Any

from . import _launch, _seccomp

__all__ = ["main"]

_LIMIT_ERRNO = {errno.EAGAIN: "processes", errno.EMFILE: "open_files", errno.EFBIG: "file_size"}
_VIOLATION_ERRNO = {errno.EACCES, errno.EROFS, errno.EPERM}
_OUTPUT_TAIL = 2000
_HANDOVERS = 3  # spares tried for one call when those before it were killed or stopped unread
_PR_SET_PDEATHSIG = 1


@functools.cache
def _libc() -> Any:
    """The C library, for ``prctl`` (loaded once, before any fork; None where unavailable)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "prctl") else None
    except (ImportError, OSError):
        return None


def _load(request: dict[str, Any]) -> Any:
    module_name = request["module"]
    if module_name == "__main__":
        # The host's script: load it under another name so its `if __name__ == "__main__"`
        # block does not run again.
        module = sys.modules.get("__sandboxed_main__")
        if module is None:
            spec = importlib.util.spec_from_file_location(
                "__sandboxed_main__", request["main_file"]
            )
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {request['main_file']!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules["__sandboxed_main__"] = module
            spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    target: Any = module
    for part in request["qualname"].split("."):
        target = getattr(target, part)
    return target


async def _await(value: Any) -> Any:
    return await value


def _call(target: Any, arguments: dict[str, Any]) -> Any:
    schema = getattr(target, "schema", None)
    func = getattr(target, "func", target)
    kwargs = schema.validate(arguments) if schema is not None else arguments
    result = func(**kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    return result


def describe(exc: BaseException) -> dict[str, Any]:
    """The JSON description of a failure (see the module docstring)."""
    code = getattr(exc, "errno", None)
    limit = "memory" if isinstance(exc, MemoryError) else _LIMIT_ERRNO.get(code or -1)
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "builtin": getattr(builtins, type(exc).__name__, None) is type(exc),
        "limit": limit,
        "violation": limit is None and code in _VIOLATION_ERRNO,
    }


def _encode(reply: dict[str, Any]) -> str:
    try:
        from pydantic_core import to_jsonable_python

        if reply.get("ok"):
            reply = {"ok": True, "result": to_jsonable_python(reply["result"])}
        return json.dumps(reply)
    except Exception as exc:  # boundary: an unserialisable result is the call's failure
        return json.dumps({"ok": False, "error": describe(TypeError(f"result: {exc}"))})


def _option(name: str) -> int | None:
    args = sys.argv[1:]
    return int(args[args.index(name) + 1]) if name in args else None


def _call_limits() -> None:
    """The call's own limits, on top of what the worker uses (see the module docstring)."""
    memory, files = _option("--call-memory-mb"), _option("--call-files")
    if not os.path.isdir("/proc/self/fd"):
        return  # not Linux (no /proc): no per-call memory and file limits
    if memory is not None:
        with open("/proc/self/statm", encoding="ascii") as handle:
            mapped = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = mapped + memory * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if files is not None:
        highest = max((int(fd) for fd in os.listdir("/proc/self/fd")), default=0)
        resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1 + files,) * 2)


_PR_SET_DUMPABLE = 4


class _Spare:
    """A child forked ahead of its call, waiting for the request on a pipe."""

    __slots__ = ("ack", "output", "pid", "reaped", "reply", "request")

    def __init__(self, program: bytes | None, private: tuple[int, ...]) -> None:
        # Closed by close(), after the call (they outlive this method).
        self.reply = tempfile.TemporaryFile()  # noqa: SIM115
        self.output = tempfile.TemporaryFile()  # noqa: SIM115
        read, self.request = os.pipe()
        # The child writes a byte here once it has read its request, before it runs anything:
        # a spare that ended without it never started its call (a killed spare not reaped yet
        # still looks like a waiting one), so the call can go to another spare.
        self.ack, acked = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        self.reaped = False
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.request)
            os.close(self.ack)
            _child(read, acked, self.reply, self.output, program, private)
        os.close(read)
        os.close(acked)
        os.set_blocking(self.ack, False)

    def descriptors(self) -> tuple[int, ...]:
        """The worker's ends of this spare's pipes and files."""
        return (self.request, self.ack, self.reply.fileno(), self.output.fileno())

    def waiting(self) -> bool:
        """Whether the child still waits for its request (not ended, not stopped)."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG | os.WUNTRACED)
        except ChildProcessError:
            self.reaped = True
            return False
        if pid and not os.WIFSTOPPED(status):
            self.reaped = True
        return pid == 0

    def run(self, request: bytes) -> int:
        """Hand the spare its request; its wait status once it replied or ended."""
        with contextlib.suppress(OSError):  # it died meanwhile: its status says so
            os.write(self.request, request)
        os.close(self.request)
        # The child stops itself once its reply is written: the worker does not wait for its
        # address space to be torn down (that happens after the reply, on SIGKILL).
        _, status = os.waitpid(self.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            self.reaped = True
        return status

    def started(self) -> bool:
        """Whether the child read its request (and so may have run the call)."""
        try:
            return bool(os.read(self.ack, 1))
        except (BlockingIOError, OSError):
            return False

    def close(self) -> None:
        """Kill the child (unless reaped already) and close its files."""
        if not self.reaped:  # a reaped pid may be another process's by now
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        if not self.reply.closed:
            for fd in (self.request, self.ack):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.reply.close()
            self.output.close()

    def reap(self, wait: bool) -> bool:
        """Whether the (killed) child is reaped now (``wait``: wait for it)."""
        if not self.reaped:
            try:
                self.reaped = os.waitpid(self.pid, 0 if wait else os.WNOHANG)[0] != 0
            except ChildProcessError:
                self.reaped = True
        return self.reaped


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _child(
    read: int,
    acked: int,
    reply: Any,
    output: Any,
    program: bytes | None,
    private: tuple[int, ...],
) -> None:
    """Run one call in the forked child; never returns.

    ``private``: the worker's own descriptors (its replies), closed: a call cannot write to
    the host's end of the protocol. Its stdin (the host's requests) becomes ``/dev/null``.
    """
    code = 0
    try:
        libc = _libc()
        if libc is not None:  # Linux: die if the worker dies
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setpgid(0, 0)
        for fd in private:
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        _call_limits()
        if program is not None:
            _seccomp.install(program)
        request = json.loads(_read_all(read) or b"null")
        if not isinstance(request, dict):
            os._exit(0)  # the worker let this spare go unused
        os.write(acked, b"1")
        os.close(acked)
        try:
            target = _load(request)
            data = _encode({"ok": True, "result": _call(target, request["arguments"])})
        except BaseException as exc:  # boundary: every failure goes back to the host, typed
            data = json.dumps({"ok": False, "error": describe(exc)})
        os.write(reply.fileno(), data.encode())
        os.kill(os.getpid(), signal.SIGSTOP)  # replied: the worker kills this child now
    except BaseException:  # boundary: the parent reports the exit status instead
        code = 1
    finally:
        os._exit(code)


def _tail(handle: Any) -> str:
    handle.seek(0, os.SEEK_END)
    handle.seek(max(0, handle.tell() - _OUTPUT_TAIL))
    return str(handle.read().decode("utf-8", errors="replace"))


class _Server:
    """The worker's state between requests: the spares for the next calls.

    In a PID namespace of the sandbox's own, two spares wait (one is ready even when calls
    come back to back: forking a spare and its first steps take longer than a call's round
    trip); in the fallback one, forked after the previous call's sweep (which kills and reaps
    every child of the subreaper).
    """

    def __init__(
        self, own_namespace: bool, program: bytes | None, private: tuple[int, ...] = ()
    ) -> None:
        self.own_namespace = own_namespace
        self.program = program
        self.private = private
        self.count = 2 if own_namespace else 1
        self.spares: list[_Spare] = []
        self.dying: list[_Spare] = []  # killed after their call, not reaped yet

    def finish(self, call: _Spare) -> None:
        """Kill ``call``'s child; reap it now or later (its teardown is not the next call's)."""
        call.close()
        if not call.reap(wait=False):
            self.dying.append(call)

    def _fork(self) -> _Spare:
        # A spare never holds another's descriptors: no call reads another's request or reply.
        others = tuple(fd for spare in self.spares for fd in spare.descriptors())
        gc.freeze()  # the collector never writes to the worker's objects in a child
        return _Spare(self.program, self.private + others)

    def prepare(self) -> None:
        """Reap what died; fork spares up to the count (the previous call's processes gone)."""
        self.dying = [call for call in self.dying if not call.reap(wait=False)]
        for spare in [spare for spare in self.spares if not spare.waiting()]:
            self.spares.remove(spare)  # a call's code killed or stopped it: replace it now
            self.finish(spare)
        while len(self.spares) < self.count:
            self.spares.append(self._fork())

    def _take(self) -> _Spare:
        """The oldest spare still waiting (one a call's code killed or stopped is dropped)."""
        while self.spares:
            spare = self.spares.pop(0)
            if spare.waiting():
                return spare
            self.finish(spare)
        return self._fork()

    def close(self) -> None:
        for call in [*self.dying, *self.spares]:
            call.close()
            call.reap(wait=True)
        self.dying, self.spares = [], []

    def _sweep(self, call: _Spare) -> None:
        """Kill what the call left: its process group, and everything it detached."""
        with contextlib.suppress(OSError):
            os.killpg(call.pid, signal.SIGKILL)  # the call and what it left in its group
        if not self.own_namespace:
            if not call.reaped:  # run() reaped a call that ended; only a stopped one is left
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(call.pid, 0)
                call.reaped = True
            _launch.kill_the_rest()  # what the call detached came back to this subreaper
            return
        # Everything else of the namespace but its init, this worker and the spares, until
        # nothing is left running (what forked meanwhile is found in the next round).
        keep = {1, os.getpid(), call.pid, *(spare.pid for spare in self.spares)}
        keep.update(dead.pid for dead in self.dying)  # killed, not reaped yet
        while _kill_all_but(keep):
            pass

    def serve(self, request: dict[str, Any]) -> tuple[str, _Spare | None]:
        """The reply to ``request``, and the finished call's child to reap once it is sent."""
        try:
            _load(request)
        except BaseException as exc:  # boundary: an import failure is the call's failure
            return json.dumps({"ok": False, "error": describe(exc)}), None
        if request.get("op") == "load":
            self.close()  # forked before the import: the next spares inherit it
            return json.dumps({"ok": True, "result": None}), None
        payload = json.dumps({**request, "arguments": dict(request.get("arguments") or {})})
        for attempt in range(_HANDOVERS):
            call = self._take()
            status = call.run(payload.encode())
            if call.started() or attempt == _HANDOVERS - 1:
                break
            # Killed or stopped before it read the request (by the previous call's code; a
            # signal sent before the request is acted on before the read returns, but it may
            # not show in the wait status until now): the call never ran; hand it to another
            # spare. Only a spare that read its request can have run the call.
            self.finish(call)
        self._sweep(call)
        call.reply.seek(0)
        data = call.reply.read().decode("utf-8", errors="replace")
        if not data:
            if os.WIFSTOPPED(status):
                code = -os.WSTOPSIG(status)
            elif os.WIFSIGNALED(status):
                code = -os.WTERMSIG(status)
            else:
                code = os.WEXITSTATUS(status)
            data = json.dumps({"ok": False, "exit": code, "output": _tail(call.output)})
        return data, call


def _kill_all_but(keep: set[int]) -> bool:
    """SIGKILL every process in ``/proc`` not in ``keep`` and add it there; whether there was one.

    A process SIGKILLed runs no more code, so it is not looked at again (its teardown may
    take a while); what it forked before is new, and found in the next round. Only in a PID
    namespace of the sandbox's own (its ``/proc`` shows only the sandbox).
    """
    found = False
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in keep:
            found = True
            keep.add(int(name))
            with contextlib.suppress(OSError):
                os.kill(int(name), signal.SIGKILL)
    return found


def main() -> None:
    """Serve requests from stdin, one per line, until it closes."""
    # `kill(-1)` must only ever run in a PID namespace of the sandbox's own, where the worker
    # is the process the namespace's init started.
    own_namespace = "--pid-namespace" in sys.argv[1:] and os.getpid() == 2 and os.getppid() == 1
    libc = _libc()  # loaded here, once: the children inherit it
    if libc is not None:
        # Not dumpable, and so neither are the children it forks (inherited from the moment
        # of the fork): no call's code can ptrace a spare or open /proc/<pid>/fd or mem of
        # the worker or a spare, which hold other calls' requests and replies.
        libc.prctl(_PR_SET_DUMPABLE, 0)
    if not own_namespace:
        _launch.become_subreaper()
    program = None
    if "--no-processes" in sys.argv[1:]:
        with contextlib.suppress(LookupError):
            program = _seccomp.build(no_processes=True, no_exec=True)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints at import go to stderr, never into a reply
    sys.stdout = sys.stderr
    server = _Server(own_namespace, program, (replies.fileno(),))
    try:
        for line in sys.stdin.buffer:
            if line.strip():
                data, finished = server.serve(json.loads(line))
                replies.write(data + "\n")
                replies.flush()
                if finished is not None:
                    server.finish(finished)
                server.prepare()
    finally:
        server.close()


if __name__ == "__main__":
    main()
