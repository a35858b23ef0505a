"""``@sandboxed(policy)`` / ``tool(..., sandbox=policy)``: a Python tool that runs in a sandbox.

Calls run in a warm worker process under the policy (bubblewrap where it runs; see
:mod:`simplellmfunc.sandbox` and ``_workers``): it imports the tool's module once and forks a
fresh child per call, which validates the JSON arguments and calls the function; the JSON result
comes back. Failures come back typed: a built-in exception as
its own type, a refused path as :class:`SandboxViolation`, a limit hit as
:class:`ResourceLimitExceeded` (with ``limit``), anything else as :class:`ToolExecutionError`. The
host never runs the tool's code, so nothing the tool does can crash it.

The function must be importable by the worker: defined at module level (in an importable module
or the main script), with JSON-serialisable arguments and result. Calling the decorated object
directly from Python (``f(x)``) runs the function in-process, like ``@tool``; the sandbox applies
to calls through the tool interface (``await f.invoke(...)``, ``await f.run(...)``, a model's).
"""

from __future__ import annotations

import builtins
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from pydantic_core import to_jsonable_python

from ..exceptions import (
    ResourceLimitExceeded,
    SandboxViolation,
    ToolDefinitionError,
    ToolExecutionError,
)
from ..sandbox import SandboxPolicy, usable
from ._tool import FunctionTool
from ._workers import WORKERS, WorkerKey

__all__ = ["SandboxedTool", "sandboxed"]

_TAIL = 2000
_START_SECONDS = 120.0


class SandboxedTool(FunctionTool):
    """A function tool whose calls run in a sandboxed worker process.

    Args:
        func: A module-level function (sync or async) with JSON-serialisable arguments/result.
        policy: The sandbox policy (default: :meth:`SandboxPolicy.default`).
        workspace: The worker's working directory, read-write (default: a private directory
            per worker, emptied after each call and removed with the worker).
        **options: As for :func:`~simplellmfunc.tools.tool` (name, description, timeout...).

    Raises:
        ToolDefinitionError: For a function that a worker cannot import or that takes injected
            framework parameters (``event_emitter``, ``abort_signal``, ``context``).
    """

    def __init__(
        self,
        func: Callable[..., Any],
        policy: SandboxPolicy | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(func, **options)
        if self.schema.injected:
            raise ToolDefinitionError(
                f"sandboxed tool {self.name!r}: framework parameters "
                f"({', '.join(self.schema.injected)}) cannot cross into a sandbox"
            )
        qualname = getattr(func, "__qualname__", "")
        if "<" in qualname or not getattr(func, "__module__", None):
            raise ToolDefinitionError(
                f"sandboxed tool {self.name!r}: the function must be defined at module level "
                "(a sandboxed worker imports it)"
            )
        self.policy = policy or SandboxPolicy()
        self.workspace = None if workspace is None else os.fspath(workspace)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        request = _request(self.func, to_jsonable_python(kwargs))
        isolated = await anyio.to_thread.run_sync(usable, self.policy)
        binds, paths = request.pop("binds"), request.pop("paths")
        key = WorkerKey(self.policy, self.workspace, tuple(binds), tuple(paths), isolated)
        with anyio.CancelScope(shield=True):  # a worker started must be given back
            worker = await anyio.to_thread.run_sync(WORKERS.acquire, key)
        healthy = False
        try:
            # Starting a worker and importing the tool are not the call's time.
            with anyio.move_on_after(_START_SECONDS) as starting:
                loaded = await anyio.to_thread.run_sync(
                    worker.load, request, abandon_on_cancel=True
                )
            if starting.cancelled_caught or loaded is None:
                raise ToolExecutionError(
                    "the sandboxed tool's worker did not start" + worker.log_tail()
                )
            if not loaded.get("ok"):
                healthy = True
                return _reply(loaded, self.policy)  # the import failed: raises
            with anyio.move_on_after(self.policy.timeout_seconds) as deadline:
                reply = await anyio.to_thread.run_sync(worker.call, request, abandon_on_cancel=True)
            if deadline.cancelled_caught:
                raise ResourceLimitExceeded(
                    f"the sandboxed tool ran longer than {self.policy.timeout_seconds:g} s "
                    "and was killed",
                    limit="wall_time",
                )
            healthy = reply is not None
            if reply is None:
                raise ToolExecutionError(
                    "the sandboxed tool's worker ended without a reply" + worker.log_tail()
                )
            return _reply(reply, self.policy)
        finally:
            # A worker in an unknown state (a call cut short, a crash) is never reused.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(WORKERS.release, worker, healthy)

    async def aclose(self) -> None:
        """Stop the idle warm workers of this tool's policy (new calls start new ones)."""
        await anyio.to_thread.run_sync(WORKERS.close, self.policy)


def sandboxed(
    policy: SandboxPolicy | None = None, **options: Any
) -> Callable[[Callable[..., Any]], SandboxedTool]:
    """Decorator: ``@sandboxed(policy)`` makes a :class:`SandboxedTool` of a function.

    ``options`` are those of :class:`SandboxedTool` and :func:`~simplellmfunc.tools.tool`.
    """
    return lambda func: SandboxedTool(func, policy, **options)


def _request(func: Callable[..., Any], arguments: Any) -> dict[str, Any]:
    """What the worker needs to find ``func``, plus the paths to bind and import from."""
    module_name = str(func.__module__)
    module = sys.modules.get(module_name)
    file = os.path.abspath(str(getattr(module, "__file__", "") or ""))
    binds: list[str] = []
    paths: list[str] = []
    if file:
        # The module's top-level package (or the file itself) and the folder that holds it.
        depth = module_name.count(".") + (1 if file.endswith("__init__.py") else 0)
        top = file
        for _ in range(depth):
            top = os.path.dirname(top)
        binds.append(top)
        paths.append(os.path.dirname(top))
    return {
        "module": module_name,
        "qualname": func.__qualname__,
        "main_file": file,
        "arguments": arguments,
        "binds": binds,
        "paths": paths,
    }


def _reply(reply: dict[str, Any], policy: SandboxPolicy) -> Any:
    if reply.get("ok"):
        return reply.get("result")
    if isinstance(reply.get("error"), dict):
        raise _error(reply["error"])
    # No reply: the call's process was killed (by a limit's signal) or crashed.
    code = int(reply.get("exit") or 0)
    number = -code if code < 0 else 0
    if number == signal.SIGXCPU or (number == signal.SIGKILL and policy.cpu_seconds):
        raise ResourceLimitExceeded(
            f"the sandboxed tool used more than {policy.cpu_seconds} s of CPU and was killed",
            limit="cpu_time",
        )
    if number == signal.SIGXFSZ:
        raise ResourceLimitExceeded("the sandboxed tool wrote too large a file", limit="file_size")
    how = f"killed by signal {signal.Signals(number).name}" if number else f"exit status {code}"
    tail = str(reply.get("output") or "").strip()[-_TAIL:]
    raise ToolExecutionError(
        f"the sandboxed tool's process ended without a reply ({how})"
        + (f":\n{tail}" if tail else "")
    )


def _error(error: dict[str, Any]) -> Exception:
    kind, message = str(error.get("type", "Error")), str(error.get("message", ""))
    text = f"{kind}: {message}" if message else kind
    if error.get("limit"):
        return ResourceLimitExceeded(f"sandbox limit hit: {text}", limit=str(error["limit"]))
    if error.get("violation"):
        return SandboxViolation(f"refused by the sandbox: {text}")
    builtin = getattr(builtins, kind, None) if error.get("builtin") else None
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        try:
            return builtin(message)
        except Exception:  # boundary: a built-in with another constructor signature
            pass
    return ToolExecutionError(text)
