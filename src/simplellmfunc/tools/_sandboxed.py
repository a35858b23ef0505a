"""``@sandboxed(policy)`` / ``tool(..., sandbox=policy)``: a Python tool that runs in a sandbox.

Calls run in a warm worker process under the policy (bubblewrap where it runs; see
:mod:`simplellmfunc.sandbox` and ``_workers``): it imports the tool's module once and forks a
fresh child per call, which validates the JSON arguments and calls the function; the JSON result
comes back. Failures come back typed: a built-in exception as
its own type, a refused path as :class:`SandboxViolation`, a limit hit as
:class:`ResourceLimitExceeded` (with ``limit``), anything else as :class:`ToolExecutionError`. The
host never runs the tool's code, so nothing the tool does can crash it.

The function must be importable by the worker: defined at module level (in an importable module
or the main script), with JSON-serialisable arguments and result. However it is called, it runs in
the sandbox: through the tool interface (``await f.invoke(...)``, ``await f(**kwargs)`` in async
code, a model's) and directly from synchronous code (``f(x)`` blocks until the sandboxed call
returns; inside a running event loop ``f(x)`` returns an awaitable instead of blocking it). A
start that misses some isolation emits a ``sandbox_warning`` event (see ``docs/sandbox.md``).
"""

from __future__ import annotations

import builtins
import inspect
import json
import os
import signal
import sys
from collections.abc import Callable, Mapping
from typing import Any, overload

import anyio
import anyio.to_thread
import sniffio
from pydantic_core import to_jsonable_python

from ..exceptions import (
    SandboxViolation,
    ToolDefinitionError,
    ToolExecutionError,
    limit_exceeded,
)
from ..sandbox import SEED_NAMES, SandboxPolicy, known_isolation, usable, warning_event
from ._emitter import ToolContext
from ._tool import FunctionTool
from ._workers import WORKERS, WorkerKey

__all__ = ["SandboxedTool", "sandboxed"]

_TAIL = 2000
_START_SECONDS = 120.0


class SandboxedTool(FunctionTool):
    """A function tool whose calls run in a sandboxed worker process.

    Args:
        func: A module-level function (sync or async) with JSON-serialisable arguments/result.
        policy: The sandbox policy (default: :meth:`SandboxPolicy.default`, seed §24.3's).
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
        self.policy = policy or SandboxPolicy.default()
        self.workspace = None if workspace is None else os.fspath(workspace)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function in the sandbox (not in-process, unlike ``@tool``'s functions).

        From synchronous code this blocks and returns the result; inside a running event loop
        it returns an awaitable (``await f(x)``).
        """
        bound = inspect.signature(self.func).bind(*args, **kwargs)
        arguments = dict(bound.arguments)
        try:
            sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            return anyio.run(self.invoke, arguments)
        return self.invoke(arguments)

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> Any:
        """Validate ``arguments`` and run the call in the sandbox (as :meth:`Tool.invoke`)."""
        kwargs = self.schema.validate(arguments)
        return await self._sandboxed_call(kwargs, context)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        return await self._sandboxed_call(kwargs, None)

    async def _sandboxed_call(self, kwargs: dict[str, Any], context: ToolContext | None) -> Any:
        request = _request(self.func, to_jsonable_python(kwargs))
        # A warm call crosses to a thread once (the call itself); the rest never blocks then.
        if known_isolation() is not None:
            isolated = usable(self.policy, f"tool {self.name!r}")
        else:
            isolated = await anyio.to_thread.run_sync(usable, self.policy, f"tool {self.name!r}")
        warning = warning_event(isolated, self.policy)
        if warning is not None and context is not None:
            await context.event_emitter.emit("sandbox_warning", warning)
        binds, paths = request.pop("binds"), request.pop("paths")
        key = WorkerKey(self.policy, self.workspace, tuple(binds), tuple(paths), isolated)
        idle = WORKERS.idle(key)
        if idle is not None:
            worker = idle
        else:
            with anyio.CancelScope(shield=True):  # a worker started must be given back
                worker = await anyio.to_thread.run_sync(WORKERS.acquire, key)
        healthy = False
        try:
            if (request["module"], request["qualname"]) not in worker.loaded:
                # Starting a worker and importing the tool are not the call's time.
                with anyio.move_on_after(_START_SECONDS) as starting:
                    loaded = await worker.load(request)
                if starting.cancelled_caught or loaded is None:
                    raise ToolExecutionError(
                        "the sandboxed tool's worker did not start" + worker.log_tail()
                    )
                if not loaded.get("ok"):
                    healthy = True
                    return _reply(loaded, self.policy)  # the import failed: raises
            with anyio.move_on_after(self.policy.timeout_seconds) as deadline:
                reply = await worker.call(request)
            if deadline.cancelled_caught:
                raise limit_exceeded(
                    f"the sandboxed tool ran longer than {self.policy.timeout_seconds:g} s "
                    "and was killed",
                    "wall_time",
                )
            healthy = reply is not None and not reply.get("too_large")
            if reply is None:
                raise ToolExecutionError(
                    "the sandboxed tool's worker ended without a reply" + worker.log_tail()
                )
            return _reply(reply, self.policy)
        finally:
            # A worker in an unknown state (a call cut short, a crash) is never reused.
            if not (healthy and WORKERS.keep(worker)):
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(WORKERS.release, worker, False)

    async def aclose(self) -> None:
        """Stop the idle warm workers of this tool's policy (new calls start new ones)."""
        await anyio.to_thread.run_sync(WORKERS.close, self.policy)


@overload
def sandboxed(policy: Callable[..., object], /) -> SandboxedTool: ...


@overload
def sandboxed(
    policy: SandboxPolicy | None = None, **options: object
) -> Callable[[Callable[..., object]], SandboxedTool]: ...


def sandboxed(
    policy: SandboxPolicy | Callable[..., object] | None = None, **options: Any
) -> SandboxedTool | Callable[[Callable[..., object]], SandboxedTool]:
    """Decorator: ``@sandboxed``, ``@sandboxed(policy)``, ``@sandboxed(timeout=10, memory_mb=64)``.

    Makes a :class:`SandboxedTool` of a function. Keyword arguments that name policy fields
    (seed §24's ``timeout`` and ``max_fds`` too) change :meth:`SandboxPolicy.default` (or
    ``policy``); the others are those of :class:`SandboxedTool` and
    :func:`~simplellmfunc.tools.tool`.

    Raises:
        ConfigError: For an invalid policy value.
    """
    fields = {k: options.pop(k) for k in list(options) if k in _POLICY_FIELDS}
    if callable(policy) and not isinstance(policy, SandboxPolicy):
        return SandboxedTool(policy, SandboxPolicy.of(**fields), **options)
    chosen = SandboxPolicy.of(policy, **fields) if fields else policy
    return lambda func: SandboxedTool(func, chosen, **options)


_POLICY_FIELDS = frozenset(SandboxPolicy.__dataclass_fields__) | frozenset(SEED_NAMES)


def _request(func: Callable[..., object], arguments: object) -> dict[str, Any]:
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
    cap = policy.max_output_bytes
    too_large = reply.get("ok") and cap is not None and len(json.dumps(reply.get("result"))) > cap
    if reply.get("too_large") or too_large:
        raise limit_exceeded(
            f"the sandboxed tool's result is larger than max_output_bytes "
            f"({policy.max_output_bytes} bytes)",
            "output",
        )
    if reply.get("ok"):
        return reply.get("result")
    if isinstance(reply.get("error"), dict):
        raise _error(reply["error"])
    # No reply: the call's process was killed (by a limit's signal) or crashed.
    code = int(reply.get("exit") or 0)
    number = -code if code < 0 else 0
    if number == signal.SIGXCPU or (number == signal.SIGKILL and policy.cpu_seconds):
        raise limit_exceeded(
            f"the sandboxed tool used more than {policy.cpu_seconds} s of CPU and was killed",
            "cpu_time",
        )
    if number == signal.SIGXFSZ:
        raise limit_exceeded("the sandboxed tool wrote too large a file", "file_size")
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
        return limit_exceeded(f"sandbox limit hit: {text}", str(error["limit"]))
    if error.get("violation"):
        return SandboxViolation(f"refused by the sandbox: {text}")
    builtin = getattr(builtins, kind, None) if error.get("builtin") else None
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        try:
            return builtin(message)
        except TypeError:  # a built-in with another constructor signature
            pass
    return ToolExecutionError(text)
