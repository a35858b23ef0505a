"""``@sandboxed(policy)`` / ``tool(..., sandbox=policy)``: a Python tool that runs in a sandbox.

Each call starts a worker process under the policy (bubblewrap where it runs; see
:mod:`simplellmfunc.sandbox`), which imports the tool's module, validates the JSON arguments and
calls the function; the JSON result comes back. Failures come back typed: a built-in exception as
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
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
from ..sandbox import SandboxPolicy, clean_environment, import_paths, sandbox_argv, usable
from ._tool import FunctionTool

__all__ = ["SandboxedTool", "sandboxed"]

_MAX_REPLY = 64 * 1024 * 1024
_TAIL = 2000
_CLEANUP_SECONDS = 10.0


class SandboxedTool(FunctionTool):
    """A function tool whose calls run in a sandboxed worker process.

    Args:
        func: A module-level function (sync or async) with JSON-serialisable arguments/result.
        policy: The sandbox policy (default: :meth:`SandboxPolicy.default`).
        workspace: The worker's working directory, read-write (default: a fresh private
            directory per call, removed afterwards).
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
        workspace = self.workspace
        private = None
        if workspace is None:
            private = workspace = await anyio.to_thread.run_sync(
                tempfile.mkdtemp, None, "slf-tool-"
            )
        try:
            paths = import_paths(os.environ.get("PYTHONPATH", ""))
            argv = sandbox_argv(
                self.policy,
                [sys.executable, "-m", "simplellmfunc.sandbox._worker"],
                workspace=workspace,
                isolated=isolated,
                read_only=[*paths, *request.pop("binds")],
            )
            env = {**clean_environment(self.policy.env), "HOME": workspace}
            env["PYTHONPATH"] = os.pathsep.join([*paths, *request.pop("paths")])
            return await _run_worker(argv, env, workspace, request, self.policy)
        finally:
            if private is not None:
                await anyio.to_thread.run_sync(shutil.rmtree, private, True)


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


async def _run_worker(
    argv: list[str], env: dict[str, str], cwd: str, request: dict[str, Any], policy: SandboxPolicy
) -> Any:
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, start_new_session=True,
        )  # fmt: skip
    out, err = bytearray(), bytearray()

    async def drain(stream: Any, sink: bytearray) -> None:
        async for chunk in stream:
            if len(sink) < _MAX_REPLY:
                sink.extend(chunk)

    try:
        with anyio.move_on_after(policy.timeout_seconds) as deadline:
            async with anyio.create_task_group() as group:
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
                assert process.stdin is not None
                await process.stdin.send(json.dumps(request).encode())
                await process.stdin.aclose()
                await process.wait()
    finally:
        with anyio.move_on_after(_CLEANUP_SECONDS, shield=True):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            await process.wait()
            await process.aclose()
    if deadline.cancelled_caught:
        raise ResourceLimitExceeded(
            f"the sandboxed tool ran longer than {policy.timeout_seconds:g} s and was killed",
            limit="wall_time",
        )
    return _reply(bytes(out), bytes(err), process.returncode or 0, policy)


def _reply(out: bytes, err: bytes, code: int, policy: SandboxPolicy) -> Any:
    try:
        reply = json.loads(out)
    except ValueError:
        reply = None
    if isinstance(reply, dict) and reply.get("ok"):
        return reply.get("result")
    if isinstance(reply, dict) and isinstance(reply.get("error"), dict):
        raise _error(reply["error"])
    # No reply: the worker was killed (by a signal, as bwrap reports 128 + signal) or crashed.
    number = -code if code < 0 else code - 128 if code > 128 else 0
    if number == signal.SIGXCPU or (number == signal.SIGKILL and policy.cpu_seconds):
        raise ResourceLimitExceeded(
            f"the sandboxed tool used more than {policy.cpu_seconds} s of CPU and was killed",
            limit="cpu_time",
        )
    if number == signal.SIGXFSZ:
        raise ResourceLimitExceeded("the sandboxed tool wrote too large a file", limit="file_size")
    tail = err.decode(errors="replace").strip()[-_TAIL:]
    raise ToolExecutionError(
        f"the sandboxed tool's worker ended without a reply (exit status {code})"
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
