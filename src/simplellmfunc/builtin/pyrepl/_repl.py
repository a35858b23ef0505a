"""``PyRepl``: a persistent Jupyter kernel per instance, exposed to agents as a toolset."""

from __future__ import annotations

import dataclasses
import functools
import os
import time
import uuid
import weakref
from collections.abc import Callable, Coroutine, Generator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio

from ..._abort import AbortSignal
from ..._resource import AsyncResource
from ...exceptions import ArgumentValueError, InputRefusedError
from ...sandbox import SandboxPolicy, as_policy
from ...tools import ApprovalFlag, Tool, ToolEventEmitter, check_approval_flag
from ._audit import AuditLog, resolve_log_dir
from ._exec import CellLimits, CellOutcome, CellRun
from ._host import PrimitiveHost
from ._input import InputBroker, delivers_live, submit_kernel_input
from ._managed import KernelSettings, ManagedKernel
from ._output import CHARS_PER_TOKEN, present_streams
from ._pool import KernelPool
from ._result import ResultContext, build_result
from ._tools import ExecuteCodeTool, ListVariablesTool, ResetReplTool

__all__ = ["PyRepl"]

_Bag = TypeVar("_Bag", CellLimits, KernelSettings)

_RESET_MESSAGE = (
    "REPL reset: all variables were cleared (the attached self_reference and runtime "
    "primitives are kept)."
)


def _check_positive(name: str, value: float) -> None:
    if not isinstance(value, int | float) or value <= 0:
        raise ArgumentValueError(f"{name} must be a positive number of seconds, got {value!r}")


def _directory(path: Any) -> str:
    """An existing directory as an absolute path string."""
    if not isinstance(path, str | os.PathLike):
        raise ArgumentValueError(f"working_directory must be a path, got {path!r}")
    absolute = Path(path).absolute()
    if not absolute.is_dir():
        what = "is a file" if absolute.exists() else "does not exist"
        raise ArgumentValueError(
            f"working_directory must be an existing directory: {str(absolute)!r} {what}"
        )
    return str(absolute)


def _bag(value: Any, kind: type[_Bag], name: str) -> _Bag:
    """``value`` when it is a ``kind``, a default one for None."""
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise ArgumentValueError(f"{name} must be a {kind.__name__}, got {value!r}")
    return value


def _override(bag: _Bag, **fields: Any) -> _Bag:
    """``bag`` with the fields given (not None) replaced: a flat keyword overrides the bag."""
    given = {name: value for name, value in fields.items() if value is not None}
    return dataclasses.replace(bag, **given) if given else bag


class _Closing:
    """What :meth:`PyRepl.close` returns: already closed, and awaitable (``await
    repl.close()`` runs :meth:`PyRepl.aclose`, which has nothing left to do)."""

    __slots__ = ("_repl",)

    def __init__(self, repl: PyRepl) -> None:
        self._repl = repl

    def __await__(self) -> Generator[Any, None, None]:
        return self._repl.aclose().__await__()


class _InputAnswer:
    """``submit_input``: on an instance, that PyRepl's requests; on the class, any PyRepl's."""

    def __get__(self, obj: PyRepl | None, owner: type[PyRepl]) -> Callable[[str, str], bool]:
        if obj is None:
            return submit_kernel_input
        return obj._submit_input


class PyRepl(PrimitiveHost, AsyncResource):
    """A persistent Python REPL: one Jupyter kernel (ipykernel) per instance.

    Variables, imports and definitions persist across executions. The kernel starts lazily on
    the first use, or eagerly with ``await repl.start()`` / ``async with PyRepl() as repl``;
    constructing an instance never blocks. Executions on one instance run one at a time
    (queued); instances are independent and run in parallel.

    ``exit()``, ``quit()`` and ``sys.exit()`` in a cell stop that cell, not the kernel: they raise
    ``SystemExit``, the rest of the cell is skipped, and the result carries a ``notice`` that the
    kernel and its variables are kept. Without a code, or with 0, the execution succeeded; with
    another code it failed (``SystemExit: <code>``). Should a cell still get IPython's request to
    stop the kernel through (the ``ask_exit`` reply payload), the kernel is shut down at once and
    that cell's result says so, as does the next one, which runs in a fresh kernel. To clear the
    namespace use :meth:`reset`; to replace the kernel, :meth:`restart`.

    Each execution starts with the kernel's own ``sys.stdout`` and ``sys.stderr``: a cell that
    replaced them (``sys.stdout = io.StringIO()``) silences only itself.

    What a background thread prints belongs to the execution during which it is printed (or to
    the next one, when printed between executions). A thread started by an earlier execution has
    each of its lines labelled ``[thread 'name' from execution [N]]``; the current execution's
    own threads, and thread pools working for it, are not labelled. Output of subprocesses is
    not attributed.

    By default the kernel runs in a sandbox (:class:`~simplellmfunc.sandbox.SandboxPolicy`, on
    bubblewrap where it can run; see ``docs/sandbox.md``): its own PID namespace (the host's
    processes are invisible, and the pids the kernel sees are not the host's), no network, the
    working directory as the only writable place, an unprivileged uid and a seccomp filter, and
    every process it starts dies with it. Where bubblewrap cannot run, the kernel refuses to
    start as root (and with ``require_isolation=True``); otherwise each kernel start logs a
    warning, its first execution emits a ``sandbox_warning`` event, and only the policy's
    resource limits, the seccomp filter and the clean environment apply.

    Options come in two bags, as httpx's ``Timeout`` and ``Limits`` do: ``limits=``
    (:class:`CellLimits`: the timeouts and output sizes of one execution) and ``kernel=``
    (:class:`KernelSettings`: how the kernel starts: directory, environment, resource limits,
    pool, sandbox). The flat keywords below are SimpleLLMFunc's names; each one given overrides
    the matching field of its bag (``PyRepl(limits=CellLimits(execution_timeout=5))`` and
    ``PyRepl(execution_timeout_seconds=5)`` are the same REPL). Defaults are the bags'.

    Args:
        working_directory: The kernel's working directory (default: with a sandbox, a private
            directory that lives as long as the kernel; without, the current directory).
        limits: A :class:`CellLimits` (default: ``CellLimits()``).
        kernel: A :class:`KernelSettings` (default: ``KernelSettings()``, sandboxed).
        execution_timeout_seconds: Active-time limit of one execution; time spent waiting for
            ``input()`` does not count, and each answered input restarts the window.
        input_idle_timeout_seconds: How long one ``input()`` waits for ``submit_input``.
        env: Environment variables for the kernel, on top of a small allowlist of the host's
            (``PATH``, ``HOME``, locale...); other host variables, API keys included, are not
            inherited.
        memory_limit_mb: Address-space limit of the kernel process (``RLIMIT_AS``), if any.
        cpu_time_limit_s: CPU-time limit of the kernel process (``RLIMIT_CPU``), if any.
        max_output_tokens: About how much output the model reads per execution; beyond it
            the head and tail are kept and the output is saved to a file (written while it
            streams, once it outgrows ``max_capture_chars``), whose path the model is given.
        interrupt_grace_seconds: How long an interrupted execution may take to stop before the
            kernel is restarted (losing its state).
        pool: A started :class:`KernelPool` to take a pre-started kernel from.
        log_dir: Root of the audit log (default: ``$LOG_DIR``, ``LOG_DIR`` in ``.env``, ``./logs``).
        startup_timeout_seconds: How long a kernel may take to start.
        max_kernel_deaths: Kernel deaths within ``kernel_death_window_seconds`` after which
            executions raise :class:`KernelError` instead of starting yet another kernel.
        kernel_death_window_seconds: The window for ``max_kernel_deaths``.
        max_capture_chars: Characters kept in memory per output stream and execution (the
            head and the tail; the output file holds the rest).
        max_output_file_chars: Characters saved per output stream and execution in its file;
            past that, the model is told how much of the output the file holds.
        sandbox: The kernel's sandbox policy: ``True`` (the default policy), a
            :class:`~simplellmfunc.sandbox.SandboxPolicy`, or ``False`` for none (the kernel
            then runs with the host user's access to every file and the network); default:
            the ``kernel`` bag's (the default policy).
        requires_approval: ``execute_code`` calls wait for a person's approval before they
            run: ``True``, or a callable over the call's arguments (``{"code": ...}``), e.g.
            :func:`~simplellmfunc.builtin.code_touches_system` (see
            ``docs/human-in-the-loop.md``).

    Raises:
        ArgumentValueError: For a non-positive timeout, a ``working_directory`` that is not
            an existing directory, or a ``limits`` / ``kernel`` of the wrong type (a
            ``UserError`` and a ``ValueError``).
    """

    #: DEFAULT_SELF_REFERENCE_BACKEND_NAME (from PrimitiveHost): the SelfReference pack's
    #: namespace, SimpleLLMFunc's name for it.
    DEFAULT_EXECUTION_TIMEOUT_SECONDS = 120.0
    DEFAULT_INPUT_IDLE_TIMEOUT_SECONDS = 300.0

    def __init__(
        self,
        working_directory: str | os.PathLike[str] | None = None,
        execution_timeout_seconds: float | None = None,
        input_idle_timeout_seconds: float | None = None,
        *,
        limits: CellLimits | None = None,
        kernel: KernelSettings | None = None,
        env: Mapping[str, str] | None = None,
        memory_limit_mb: int | None = None,
        cpu_time_limit_s: int | None = None,
        max_output_tokens: int | None = None,
        interrupt_grace_seconds: float | None = None,
        pool: KernelPool | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        startup_timeout_seconds: float | None = None,
        max_kernel_deaths: int | None = None,
        kernel_death_window_seconds: float | None = None,
        max_capture_chars: int | None = None,
        max_output_file_chars: int | None = None,
        sandbox: SandboxPolicy | bool | None = None,
        requires_approval: ApprovalFlag = False,
    ) -> None:
        for name, value in (
            ("execution_timeout_seconds", execution_timeout_seconds),
            ("input_idle_timeout_seconds", input_idle_timeout_seconds),
            ("interrupt_grace_seconds", interrupt_grace_seconds),
        ):
            if value is not None:
                _check_positive(name, value)
        self._limits = _override(
            _bag(limits, CellLimits, "limits"),
            execution_timeout=execution_timeout_seconds,
            input_idle_timeout=input_idle_timeout_seconds,
            interrupt_grace=interrupt_grace_seconds,
            max_capture_chars=max_capture_chars,
            max_file_chars=max_output_file_chars,
            max_output_tokens=max_output_tokens,
        )
        settings = _override(
            _bag(kernel, KernelSettings, "kernel"),
            env=None if env is None else dict(env),
            memory_limit_mb=memory_limit_mb,
            cpu_time_limit_s=cpu_time_limit_s,
            pool=pool,
            startup_timeout=startup_timeout_seconds,
            max_deaths=max_kernel_deaths,
            death_window=kernel_death_window_seconds,
        )
        if sandbox is not None:
            settings = dataclasses.replace(settings, sandbox=as_policy(sandbox))
        cwd = settings.cwd if working_directory is None else working_directory
        if cwd is None and settings.sandbox is None:
            cwd = os.getcwd()
        self._cwd = None if cwd is None else _directory(cwd)
        self._max_output_tokens = self._limits.max_output_tokens
        self._kernel = ManagedKernel(dataclasses.replace(settings, cwd=self._cwd))
        self._log_dir = log_dir
        self._instance_id = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:8]}"
        self._audit: AuditLog | None = None
        self._sandbox_cache: tuple[SandboxPolicy, dict[str, Any]] | None = None
        # Uncontended (the usual case), taking it costs no trip through the event loop.
        self._lock = anyio.Lock(fast_acquire=True)
        self._inputs = InputBroker()
        self._self_reference: Any = None
        self._sequence = 0
        self._toolset: list[Tool] | None = None
        # Garbage-collected unclosed: the kernel goes too (without an event loop, never hanging).
        weakref.finalize(self, self._kernel.close_now)
        self._requires_approval = check_approval_flag(requires_approval)

    # -- properties ---------------------------------------------------------------------------

    @property
    def execution_timeout_seconds(self) -> float:
        """Active-time limit of one execution (``execute(timeout_seconds=...)`` overrides it)."""
        return self._limits.execution_timeout

    @property
    def input_idle_timeout_seconds(self) -> float:
        """How long one ``input()`` waits for an answer."""
        return self._limits.input_idle_timeout

    @property
    def instance_id(self) -> str:
        """This instance's id (also the name of its audit directory)."""
        return self._instance_id

    @property
    def audit_log_dir(self) -> Path:
        """``<LOG_DIR>/pyrepl/<instance_id>`` (created on the first execution)."""
        return self._audit_log().directory

    @property
    def audit_log_file(self) -> Path:
        """``<audit_log_dir>/executions.jsonl``."""
        return self._audit_log().file

    @property
    def working_directory(self) -> Path | None:
        """The kernel's working directory (None: a private one, not started yet)."""
        cwd = self._kernel.cwd
        return None if cwd is None else Path(cwd)

    @property
    def sandbox(self) -> SandboxPolicy | None:
        """The kernel's sandbox policy (None: no sandbox)."""
        return self._kernel.settings.sandbox

    @property
    def isolated(self) -> bool:
        """Whether the running kernel is isolated by bubblewrap (False: not running, fallback,
        or no sandbox)."""
        session = self._kernel.session
        return session is not None and not session.closed and session.isolated

    @property
    def self_reference(self) -> Any:
        """The object attached with :meth:`attach_self_reference`, if any."""
        return self._self_reference

    @property
    def is_running(self) -> bool:
        """Whether a kernel is currently running for this instance."""
        return self._kernel.running

    @property
    def toolset(self) -> list[Tool]:
        """The tools for an agent: ``execute_code``, ``reset_repl``, ``list_variables``."""
        if self._toolset is None:
            # An abort interrupts the cell: wait for its partial output (interrupt grace,
            # plus the watchdog's poll and the result's assembly).
            execute = ExecuteCodeTool(
                self,
                self._max_output_tokens,
                self._limits.interrupt_grace + 5.0,
                prompt_injection_builder=lambda _tool: self.pack_guidance(),
            )
            execute.requires_approval = self._requires_approval
            self._toolset = [execute, ResetReplTool(self), ListVariablesTool(self)]
        return list(self._toolset)

    def _sandbox_dict(self) -> dict[str, Any] | None:
        """The policy for the audit log, converted once (it is frozen)."""
        policy = self.sandbox
        if policy is None:
            return None
        cached = self._sandbox_cache
        if cached is None or cached[0] is not policy:
            cached = self._sandbox_cache = (policy, policy.to_dict())
        return dict(cached[1])

    def _audit_log(self) -> AuditLog:
        if self._audit is None:
            self._audit = AuditLog(resolve_log_dir(self._log_dir), self._instance_id)
        return self._audit

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the kernel now (otherwise it starts on first use).

        Raises:
            KernelError: If the kernel cannot start, or this instance is closed.
        """
        async with self._lock:
            await self._kernel.ready()

    def close(self) -> _Closing:
        """Shut the kernel down now, without an event loop, and release everything; idempotent.

        SimpleLLMFunc's ``repl.close()`` is synchronous, so this is too: the kernel and every
        process it spawned are killed and its files removed before it returns (blocking for a
        moment; from async code prefer ``await repl.aclose()``). ``await repl.close()`` also
        works. A PyRepl that is garbage-collected or still open at interpreter exit is closed the
        same way, and no kernel socket waits for a gone kernel (no hang in ``zmq_ctx_term``).
        """
        self._kernel.close_now()
        return _Closing(self)

    async def aclose(self) -> None:
        """Shut the kernel down and release everything; idempotent.

        Kills the kernel and every process it spawned: its process group, and on Linux also
        what left the group (``start_new_session=True``, daemons), found by parentage and by a
        marker variable in the environment they inherited. A process that both cleared its
        environment and left the kernel's process tree is not found: run code that must not
        escape in a sandbox. Replacing a kernel (death, restart, a cell that did not stop) kills
        the same way.

        Runs shielded with a bound: a cancelled caller still leaves no process or file behind.
        """
        await self._kernel.close()

    async def restart(self) -> None:
        """Replace the kernel with a fresh one (state is lost); also clears the death count.

        Raises:
            KernelError: If the new kernel cannot start.
        """
        async with self._lock:
            await self._kernel.restart()
            await self._kernel.ready()

    async def open(self) -> None:
        """Start the kernel (what ``async with repl:`` does; :meth:`start` is the same)."""
        await self.start()

    # -- executing ----------------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        event_emitter: ToolEventEmitter | None = None,
        abort_signal: AbortSignal | None = None,
        timeout_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Run ``code`` and return the result dict.

        ``timeout_seconds`` replaces the instance's ``execution_timeout_seconds`` for this call
        (active time: waiting for ``input()`` does not count).

        The dict holds ``success``, ``stdout``, ``stderr``, ``return_value`` (repr of the last
        expression), ``error`` (a readable message that points at the failing line),
        ``error_details`` (``error_type``, ``message``, ``line``, ``column``, ``snippet``,
        ``pointer``, ``summary``, ``user_traceback``), ``execution_time_ms``, ``artifacts``
        (images), ``execution_count``, ``notice`` and ``output_files`` (full output of cut
        streams).

        ``notice`` is set, once, on the first result after the kernel was replaced, whatever
        replaced it: a death, an exit (between executions, or a request to stop the kernel that
        got past ``exit()``), a cell that did not stop after an interrupt (a timeout, an abort,
        or a cancelled caller such as the engine's ``tool_timeout``), a failed configuration, or
        :meth:`restart`. It says that every earlier variable, import and definition is gone.

        With an ``event_emitter``, output streams as ``kernel_stdout`` / ``kernel_stderr``
        events and shown images as ``kernel_image`` events. When the emitter delivers live
        (inside a run with events enabled, or built with a ``sink``), ``input()`` emits
        ``kernel_input_request`` (answer with :meth:`submit_input`); otherwise ``input()``
        fails at once with a clear error.

        Raises:
            ArgumentValueError: For a non-positive ``timeout_seconds``.
            KernelError: If no kernel can be started (including after repeated kernel deaths).
        """
        limits = self._limits
        if timeout_seconds is not None:
            _check_positive("timeout_seconds", timeout_seconds)
            limits = dataclasses.replace(limits, execution_timeout=float(timeout_seconds))
        async with self._lock:
            started_at = datetime.now(UTC)
            started = time.perf_counter()
            session = await self._kernel.ready()
            if event_emitter is not None and session.warning is not None and not session.warned:
                session.warned = True  # every kernel start that misses isolation says so
                await event_emitter.emit("sandbox_warning", session.warning)
            notice = self._kernel.take_notice()
            self._sequence += 1
            paths = self._output_paths()
            if abort_signal is not None and abort_signal.aborted:
                outcome = CellOutcome(verdict="aborted", ran=False)
            else:
                run = CellRun(
                    session,
                    code,
                    limits,
                    emitter=event_emitter,
                    abort=abort_signal,
                    inputs=self._inputs,
                    allow_input=delivers_live(event_emitter),
                    serve=_with_emitter(self._kernel.serve(), event_emitter),
                    output_paths=paths,
                )
                outcome = await run.run()
            self._kernel.record(outcome)
            return await self._finish(
                outcome, code, started_at, started, notice, event_emitter, abort_signal, paths,
                limits,
            )  # fmt: skip

    def _output_paths(self) -> dict[str, str]:
        """Where the output of the current execution goes when the model cannot read it all."""
        audit = self._audit_log()
        return {name: audit.spill_path(self._sequence, name) for name in ("stdout", "stderr")}

    async def _finish(
        self,
        outcome: CellOutcome,
        code: str,
        started_at: datetime,
        started: float,
        notice: str | None,
        emitter: ToolEventEmitter | None,
        abort: AbortSignal | None,
        paths: dict[str, str],
        limits: CellLimits,
    ) -> dict[str, Any]:
        audit = self._audit_log()
        streams = await present_streams(
            {"stdout": outcome.stdout, "stderr": outcome.stderr},
            max(self._max_output_tokens, 1) * CHARS_PER_TOKEN,
            paths,
            audit.write_spill,
        )
        context = ResultContext(
            limits=limits,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            max_output_tokens=self._max_output_tokens,
            streams=streams,
            notice=notice,
            input_enabled=delivers_live(emitter),
            abort_reason=abort.reason if abort is not None else "",
        )
        result = build_result(outcome, context)
        settings = {
            "execution_timeout_seconds": limits.execution_timeout,
            "input_idle_timeout_seconds": self._limits.input_idle_timeout,
            "working_directory": self._kernel.cwd,
            "sandbox": self._sandbox_dict(),
            "isolated": self.isolated,
        }
        await audit.record(
            sequence=self._sequence, started=started_at, code=code, result=result, settings=settings
        )
        return result

    def _submit_input(self, request_id: str, value: str) -> bool:
        """Answer the ``kernel_input_request`` event ``request_id`` with ``value``.

        Also callable on the class, as SimpleLLMFunc's input UI calls it
        (``PyRepl.submit_input(request_id, value)``): the request of any PyRepl of this
        process with that (random) id is answered.

        Returns:
            Whether a pending request took the value; when not, :meth:`input_refusal` says why
            (it timed out, was already answered, its execution ended, or the id is unknown).
            :meth:`answer_input` raises with that reason instead.
        """
        return self._inputs.submit(request_id, str(value))

    submit_input = _InputAnswer()

    def input_refusal(self, request_id: str) -> str:
        """Why ``request_id`` takes no answer now ("" while it is pending): it timed out, was
        already answered, the execution that asked for it ended or was aborted, or no
        ``input()`` request has this id."""
        return self._inputs.why_not(request_id)

    def answer_input(self, request_id: str, value: str) -> None:
        """Answer ``request_id`` like :meth:`submit_input`, raising when it cannot be answered.

        Raises:
            InputRefusedError: With the reason (timed out, already answered, execution ended,
                unknown id).
        """
        if not self._submit_input(request_id, value):
            reason = self.input_refusal(request_id)
            raise InputRefusedError(f"input request {request_id!r} was not answered: {reason}")

    async def interrupt(self) -> None:
        """Interrupt the running execution, if any (like Ctrl-C; state is kept)."""
        if self._kernel.session is not None:
            await self._kernel.session.interrupt()

    async def reset(self) -> str:
        """Delete every user variable; attached objects and primitives are kept.

        Raises:
            KernelError: If the kernel cannot be reached.
        """
        async with self._lock:
            if self.is_running:
                session = await self._kernel.ready()
                await session.control("reset")
            return _RESET_MESSAGE

    async def list_variables(self) -> list[dict[str, str]]:
        """Return ``[{"name", "type"}]`` of user variables (private names and
        ``self_reference`` / ``runtime`` left out).

        Raises:
            KernelError: If the kernel cannot be reached.
        """
        async with self._lock:
            if not self.is_running:
                return []
            session = await self._kernel.ready()
            variables = await session.control("variables")
            return [{"name": str(v["name"]), "type": str(v["type"])} for v in variables]

    def fork(self) -> PyRepl:
        """A new, unstarted PyRepl with this one's settings, primitive packs and attached
        ``self_reference``; its kernel is its own (nothing of this one's namespace is shared).

        SelfReference forks give each child agent one. The caller owns the copy: close it.
        """
        clone = PyRepl(limits=self._limits, kernel=self._kernel.settings, log_dir=self._log_dir)
        clone._kernel.packs.update(self._kernel.packs)
        clone._kernel.selfref_namespace = self._kernel.selfref_namespace
        clone._self_reference = self._self_reference
        return clone

    def __repr__(self) -> str:
        closed = self._kernel.closed
        state = "closed" if closed else "running" if self.is_running else "not started"
        return f"<PyRepl {self._instance_id} {state} cwd={self._kernel.cwd!r}>"


def _with_emitter(
    serve: Callable[..., Coroutine[Any, Any, None]] | None, emitter: ToolEventEmitter | None
) -> Callable[[], Coroutine[Any, Any, None]] | None:
    """The bridge server of a cell, told the cell's emitter (primitives reach it)."""
    return None if serve is None else functools.partial(serve, emitter)
