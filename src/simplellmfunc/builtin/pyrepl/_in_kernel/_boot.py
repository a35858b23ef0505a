"""Kernel side: the bootstrap the host runs in every kernel (standard library and IPython only).

The host imports this module inside the kernel through an alias package (see
``.._session._LOADER``) so that nothing of the host package, and none of its dependencies, is
imported into the kernel. The host then talks to it through :func:`control`, evaluated as a
``user_expressions`` entry of a silent execute request: one JSON string in, one JSON string out.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import _errors, _runtime, _streams, _threads

__all__ = ["ERROR_MIME", "IMAGE_MIME", "control", "install"]

ERROR_MIME = "application/vnd.simplellmfunc.error+json"
IMAGE_MIME = "application/vnd.simplellmfunc.image+json"
_HIDDEN = frozenset({"In", "Out", "exit", "quit", "get_ipython", "runtime", "self_reference"})

_STATE: dict[str, Any] = {"shell": None, "runtime": None, "selfref": None, "fd": False}


@contextlib.contextmanager
def _no_tee(channel: str) -> Iterator[None]:
    # IPython keeps every cell's output in memory for its history; a long session printing
    # large outputs would grow without bound, and the host already records outputs.
    yield


def _image_bundle(kind: str) -> Callable[[Any], dict[str, Any]]:
    def bundle(obj: Any) -> dict[str, Any]:
        if kind == "path":
            ref = {"path": os.path.abspath(str(obj.path)), "detail": obj.detail}
        else:
            ref = {"url": str(obj.url), "detail": obj.detail}
        return {IMAGE_MIME: ref, "text/plain": repr(obj)}

    return bundle


def _pre_execute() -> None:
    """Give every execution the kernel's own output streams, writable at the class level."""
    _streams.restore(getattr(_STATE["shell"], "parent_header", None))
    _streams.unshadow()


def _pre_run_cell(info: Any) -> None:
    """A user cell starts: it owns the output from now on (held thread output comes first)."""
    _threads.begin(_STATE["shell"].execution_count, lambda stream, text: stream.write(text))


def _post_run_cell(result: Any) -> None:
    """Forward pending fd output, and publish error details for a failed cell."""
    _streams.drain()
    count = getattr(result, "execution_count", None)
    _threads.end(count if isinstance(count, int) else None)
    if result is None:
        return
    before = result.error_before_exec
    exc = before if before is not None else result.error_in_exec
    if exc is None:
        return
    shell = _STATE["shell"]
    try:
        details = _errors.describe(
            exc,
            shell,
            before_exec=before is not None,
            current=result.execution_count,
            raw_cell=getattr(getattr(result, "info", None), "raw_cell", None),
        )
    except Exception as failure:  # boundary: never let error reporting break the kernel
        details = {"error_type": type(exc).__name__, "message": str(exc), "internal": repr(failure)}
    shell.display_pub.publish(data={ERROR_MIME: details}, metadata={})


def _plain_tracebacks(shell: Any) -> None:
    # The host builds its own error details; IPython's verbose, coloured tracebacks would only
    # cost time (tens of milliseconds per error) and ANSI noise.
    with contextlib.suppress(Exception):
        shell.InteractiveTB.set_mode(mode="Plain")
    with contextlib.suppress(Exception):
        shell.InteractiveTB.set_colors("nocolor")


def _stop_cell() -> None:
    raise SystemExit(None)


def _exit_stops_the_cell(shell: Any) -> None:
    """Make ``exit()`` / ``quit()`` stop the cell (like ``sys.exit()``) instead of the kernel.

    IPython's ``exit`` only flags the kernel to stop a moment after the cell, so the rest of the
    cell runs, the next execution too, and the one after finds a dead kernel. Here they raise
    ``SystemExit(code)``, which IPython catches at the cell boundary; the host reports it.
    """
    from IPython.core.autocall import ZMQExitAutocall

    class StopCell(ZMQExitAutocall):
        """``exit`` / ``quit`` here: stop this execution; the kernel and its state stay."""

        def __call__(self, code: Any = None) -> None:
            raise SystemExit(code)

    exiter = StopCell(shell)  # type: ignore[no-untyped-call]
    shell.exiter = exiter  # reset() puts ``shell.exiter`` back into the namespace
    shell.ask_exit = _stop_cell  # direct calls of the shell's exit request
    for name in ("exit", "quit"):
        shell.user_ns[name] = exiter
        shell.user_ns_hidden[name] = exiter
    # IPython's hint after a SystemExit tells the reader how to end the kernel: not wanted here.
    message = re.escape("To exit: use 'exit', 'quit', or Ctrl-D.")
    warnings.filterwarnings("ignore", message=message, category=UserWarning)


def install(shell: Any) -> dict[str, Any]:
    """Install hooks once per kernel process; returns what is active."""
    if _STATE["shell"] is None:
        _STATE["shell"] = shell
        _STATE["runtime"] = _runtime.Runtime()
        _STATE["fd"] = _streams.install()
        _threads.install()
        _streams.set_router(_threads.route)
        _plain_tracebacks(shell)
        _exit_stops_the_cell(shell)
        if hasattr(shell, "_tee"):
            shell._tee = _no_tee
        shell.events.register("pre_execute", _pre_execute)
        shell.events.register("pre_run_cell", _pre_run_cell)
        shell.events.register("post_run_cell", _post_run_cell)
        formatter = shell.display_formatter.mimebundle_formatter
        # By the module the class says it is in: its public one (``simplellmfunc.types`` once
        # that is imported), or the one it is defined in, before.
        for kind, name in (("path", "ImgPath"), ("url", "ImgUrl")):
            for module in ("simplellmfunc.types", "simplellmfunc", "simplellmfunc._content"):
                formatter.for_type_by_name(module, name, _image_bundle(kind))
    _inject()
    return {"fd_capture": _STATE["fd"], "pid": os.getpid()}


def _inject() -> None:
    shell = _STATE["shell"]
    names: dict[str, Any] = {"runtime": _STATE["runtime"]}
    selfref = _STATE["selfref"]
    if selfref is not None:
        names["self_reference"] = _runtime.RemotePath(_STATE["runtime"], (selfref,), ())
    shell.user_ns.update(names)
    # Hidden names are left out of %who and of list_variables.
    shell.user_ns_hidden.update(names)


def _set_limits(memory_mb: int | None, cpu_s: int | None) -> None:
    import resource

    if memory_mb:
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if cpu_s:
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        # RLIMIT_CPU counts the process's whole life: allow cpu_s more than spent so far.
        resource.setrlimit(resource.RLIMIT_CPU, (spent + int(cpu_s), spent + int(cpu_s) + 5))


def _configure(config: dict[str, Any]) -> dict[str, Any]:
    if config.get("cwd"):
        os.chdir(config["cwd"])
    os.environ.update({str(k): str(v) for k, v in (config.get("env") or {}).items()})
    if config.get("memory_limit_mb") or config.get("cpu_time_limit_s"):
        _set_limits(config.get("memory_limit_mb"), config.get("cpu_time_limit_s"))
    _STATE["runtime"]._configure(config.get("bridge"))
    _STATE["selfref"] = config.get("self_reference")
    _inject()
    return {"cwd": os.getcwd()}


def _reset() -> dict[str, Any]:
    shell = _STATE["shell"]
    shell.reset(new_session=False)
    _inject()
    return {}


def _variables() -> list[dict[str, str]]:
    shell = _STATE["shell"]
    hidden = shell.user_ns_hidden
    out = []
    for name, value in list(shell.user_ns.items()):
        if name.startswith("_") or name in _HIDDEN:
            continue
        if name in hidden and hidden[name] is value:
            continue
        out.append({"name": name, "type": type(value).__name__})
    return out


def control(request: str) -> str:
    """Run one host command (``{"op": ..., ...}``) and return ``{"ok", "result"|"error"}``."""
    try:
        command = json.loads(request)
        op = command["op"]
        if op == "install":
            from IPython import get_ipython

            result: Any = install(get_ipython())
        elif op == "configure":
            result = _configure(command["config"])
        elif op == "reset":
            result = _reset()
        elif op == "variables":
            result = _variables()
        elif op == "ping":
            result = {"pid": os.getpid()}
        else:
            raise ValueError(f"unknown op {op!r}")
    except Exception as exc:  # boundary: report to the host instead of failing the request
        return json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
    return json.dumps({"ok": True, "result": result}, default=str)
