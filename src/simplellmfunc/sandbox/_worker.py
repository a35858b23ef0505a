"""The sandboxed worker: serves Python tool calls inside a sandbox (``python -m`` this module).

It stays up between calls (a warm worker: its imports are paid once) and forks a child per call,
so each call still starts from the same clean state with fresh limits (CPU time counts from zero,
the address-space limit is the child's own) and a crash or limit hit kills only that child.

Requests arrive one per line on stdin as JSON (``module``, ``qualname``, ``main_file``,
``arguments``; ``"op": "load"`` only imports); the worker imports the tool once (in itself, so
the children inherit it), forks,
and the child validates the arguments with the tool's schema, calls it (awaiting coroutines) and
leaves its reply in a file; what the tool prints goes to another. One JSON line answers each
request on the stdout the worker started with::

    {"ok": true, "result": ...}
    {"ok": false, "error": {"type", "message", "builtin", "limit", "violation"}}
    {"ok": false, "exit": <wait status as Popen.returncode>, "output": "<the call's last output>"}

``limit`` names the policy limit an error comes from (``MemoryError``: ``"memory"``; ``EAGAIN``
from fork: ``"processes"``; ``EMFILE``: ``"open_files"``; ``EFBIG``: ``"file_size"``);
``violation`` is set for a refused path (``EACCES``, ``EROFS``, ``EPERM``). ``exit`` says the
child ended without a reply (killed by a limit, crashed).

After each call, whatever the call left running is killed: its process group, and, in a
sandbox's own PID namespace (``--pid-namespace``), every process but the worker and the
namespace's init; without one (the fallback) the worker is a child subreaper, so what a call
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


def _child(
    target: Any, arguments: dict[str, Any], reply: Any, output: Any, program: bytes | None
) -> None:
    """Run one call in the forked child; never returns."""
    code = 0
    try:
        libc = _libc()
        if libc is not None:  # Linux: die if the worker dies
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        os.setpgid(0, 0)
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        _call_limits()
        if program is not None:
            _seccomp.install(program)
        try:
            data = _encode({"ok": True, "result": _call(target, arguments)})
        except BaseException as exc:  # boundary: every failure goes back to the host, typed
            data = json.dumps({"ok": False, "error": describe(exc)})
        os.write(reply.fileno(), data.encode())
    except BaseException:  # boundary: the parent reports the exit status instead
        code = 1
    finally:
        os._exit(code)


def _tail(handle: Any) -> str:
    handle.seek(0, os.SEEK_END)
    handle.seek(max(0, handle.tell() - _OUTPUT_TAIL))
    return str(handle.read().decode("utf-8", errors="replace"))


def _serve_one(request: dict[str, Any], own_namespace: bool, program: bytes | None) -> str:
    try:
        target = _load(request)
    except BaseException as exc:  # boundary: an import failure is the call's failure
        return json.dumps({"ok": False, "error": describe(exc)})
    if request.get("op") == "load":
        return json.dumps({"ok": True, "result": None})
    arguments = dict(request.get("arguments") or {})
    with tempfile.TemporaryFile() as reply, tempfile.TemporaryFile() as output:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(target, arguments, reply, output, program)
        _, status = os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # what the call left in its process group
        if own_namespace:
            with contextlib.suppress(OSError):
                os.kill(-1, signal.SIGKILL)  # everything else of the namespace, detached too
        else:
            _launch.kill_the_rest()  # what the call detached came back to this subreaper
        reply.seek(0)
        data = reply.read().decode("utf-8", errors="replace")
        if data:
            return data
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        return json.dumps({"ok": False, "exit": code, "output": _tail(output)})


def main() -> None:
    """Serve requests from stdin, one per line, until it closes."""
    # `kill(-1)` must only ever run in a PID namespace of the sandbox's own, where the worker
    # is the process the namespace's init started.
    own_namespace = "--pid-namespace" in sys.argv[1:] and os.getpid() == 2 and os.getppid() == 1
    _libc()  # loaded here, once: the children inherit it
    if not own_namespace:
        _launch.become_subreaper()
    program = None
    if "--no-processes" in sys.argv[1:]:
        with contextlib.suppress(LookupError):
            program = _seccomp.build(no_processes=True, no_exec=True)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # prints at import go to stderr, never into a reply
    sys.stdout = sys.stderr
    for line in sys.stdin.buffer:
        if line.strip():
            replies.write(_serve_one(json.loads(line), own_namespace, program) + "\n")
            replies.flush()


if __name__ == "__main__":
    main()
