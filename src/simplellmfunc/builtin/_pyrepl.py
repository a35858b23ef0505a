"""``PyRepl``: a persistent Jupyter kernel per instance, exposed to agents as a toolset."""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from .._abort import AbortSignal
from ..exceptions import KernelError, UserError
from ..tools._emitter import ToolEventEmitter
from ..tools._tool import Tool
from ._bridge_host import BridgeServer
from ._bridge_pack import PrimitivePack
from ._kernel_exec import CellLimits, CellOutcome, CellRun, InputBroker, delivers_live
from ._kernel_session import KernelSession, SessionOptions
from ._pyrepl_audit import AuditLog, resolve_log_dir
from ._pyrepl_result import ResultContext, build_result
from ._pyrepl_tools import ExecuteCodeTool, ListVariablesTool, ResetReplTool

if TYPE_CHECKING:
    from ._kernel_pool import KernelPool

__all__ = ["PrimitivePack", "PyRepl"]

_RESET_MESSAGE = (
    "REPL reset: all variables were cleared (the attached self_reference and runtime "
    "primitives are kept)."
)
_LOST_STATE = (
    "This code ran in a fresh Python kernel: the previous kernel {why}, so every variable, "
    "import and definition from earlier executions is gone."
)


class PyRepl:
    """A persistent Python REPL: one Jupyter kernel (ipykernel) per instance.

    Variables, imports and definitions persist across executions. The kernel starts lazily on
    the first use, or eagerly with ``await repl.start()`` / ``async with PyRepl() as repl``;
    constructing an instance never blocks. Executions on one instance run one at a time
    (queued); instances are independent and run in parallel.

    Args:
        working_directory: The kernel's working directory (default: the current directory).
        execution_timeout_seconds: Active-time limit of one execution; time spent waiting for
            ``input()`` does not count, and each answered input restarts the window.
        input_idle_timeout_seconds: How long one ``input()`` waits for ``submit_input``.
        env: Environment variables for the kernel, on top of a small allowlist of the host's
            (``PATH``, ``HOME``, locale...); other host variables, API keys included, are not
            inherited.
        memory_limit_mb: Address-space limit of the kernel process (``RLIMIT_AS``), if any.
        cpu_time_limit_s: CPU-time limit of the kernel process (``RLIMIT_CPU``), if any.
        max_output_tokens: About how much output the model reads per execution; beyond it
            the head and tail are kept and the full output is saved to a file.
        interrupt_grace_seconds: How long an interrupted execution may take to stop before the
            kernel is restarted (losing its state).
        pool: A started :class:`KernelPool` to take a pre-started kernel from.
        log_dir: Root of the audit log (default: ``$LOG_DIR``, ``LOG_DIR`` in ``.env``, ``./logs``).
        startup_timeout_seconds: How long a kernel may take to start.
        max_kernel_deaths: Kernel deaths within ``kernel_death_window_seconds`` after which
            executions raise :class:`KernelError` instead of starting yet another kernel.
        kernel_death_window_seconds: The window for ``max_kernel_deaths``.
        max_capture_chars: Characters kept in memory per output stream and execution.

    Raises:
        UserError: For a non-positive timeout.
    """

    def __init__(
        self,
        working_directory: str | os.PathLike[str] | None = None,
        execution_timeout_seconds: float = 120.0,
        input_idle_timeout_seconds: float = 300.0,
        *,
        env: Mapping[str, str] | None = None,
        memory_limit_mb: int | None = None,
        cpu_time_limit_s: int | None = None,
        max_output_tokens: int = 20_000,
        interrupt_grace_seconds: float = 5.0,
        pool: KernelPool | None = None,
        log_dir: str | os.PathLike[str] | None = None,
        startup_timeout_seconds: float = 60.0,
        max_kernel_deaths: int = 3,
        kernel_death_window_seconds: float = 300.0,
        max_capture_chars: int = 4_000_000,
    ) -> None:
        for name, value in (
            ("execution_timeout_seconds", execution_timeout_seconds),
            ("input_idle_timeout_seconds", input_idle_timeout_seconds),
            ("interrupt_grace_seconds", interrupt_grace_seconds),
        ):
            if value <= 0:
                raise UserError(f"{name} must be positive, got {value!r}")
        self._cwd = str(Path(working_directory or os.getcwd()).absolute())
        self._env = dict(env or {})
        self._memory_limit_mb = memory_limit_mb
        self._cpu_time_limit_s = cpu_time_limit_s
        self._max_output_tokens = max_output_tokens
        self._limits = CellLimits(
            execution_timeout_seconds,
            input_idle_timeout_seconds,
            interrupt_grace_seconds,
            max_capture_chars,
        )
        self._pool = pool
        self._log_dir = log_dir
        self._startup_timeout = startup_timeout_seconds
        self._max_deaths = max_kernel_deaths
        self._death_window = kernel_death_window_seconds
        self._instance_id = f"{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:8]}"
        self._audit: AuditLog | None = None
        self._lock = anyio.Lock()
        self._inputs = InputBroker()
        self._session: KernelSession | None = None
        self._configured = False
        self._packs: dict[str, PrimitivePack] = {}
        self._self_reference: Any = None
        self._selfref_namespace: str | None = None
        self._bridge: BridgeServer | None = None
        self._deaths: deque[float] = deque()
        self._lost: str | None = None
        self._sequence = 0
        self._closed = False
        self._toolset: list[Tool] | None = None

    # -- properties ---------------------------------------------------------------------------

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
    def working_directory(self) -> Path:
        """The kernel's working directory."""
        return Path(self._cwd)

    @property
    def self_reference(self) -> Any:
        """The object attached with :meth:`attach_self_reference`, if any."""
        return self._self_reference

    @property
    def is_running(self) -> bool:
        """Whether a kernel is currently running for this instance."""
        return self._session is not None and not self._session.closed

    @property
    def toolset(self) -> list[Tool]:
        """The tools for an agent: ``execute_code``, ``reset_repl``, ``list_variables``."""
        if self._toolset is None:
            self._toolset = [ExecuteCodeTool(self), ResetReplTool(self), ListVariablesTool(self)]
        return list(self._toolset)

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
            await self._ready_session()

    async def close(self) -> None:
        """Shut the kernel down and release everything; idempotent.

        Runs shielded with a bound: a cancelled caller still leaves no process or file behind.
        """
        self._closed = True
        with anyio.CancelScope(shield=True):
            session, self._session = self._session, None
            if session is not None:
                await session.destroy()
            bridge, self._bridge = self._bridge, None
            if bridge is not None:
                await bridge.close()

    async def restart(self) -> None:
        """Replace the kernel with a fresh one (state is lost); also clears the death count.

        Raises:
            KernelError: If the new kernel cannot start.
        """
        async with self._lock:
            self._deaths.clear()
            session, self._session = self._session, None
            if session is not None:
                await session.destroy()
            await self._ready_session()

    async def __aenter__(self) -> PyRepl:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def _ready_session(self) -> KernelSession:
        if self._closed:
            raise KernelError("this PyRepl is closed")
        session = self._session
        if session is not None and not session.closed and not await session.is_alive():
            # It exited between executions (exit() in a cell, a crash in a background thread).
            await session.destroy()
            self._lost = _LOST_STATE.format(why="exited between executions")
        if session is None or session.closed:
            session = await self._new_session()
        if not self._configured:
            await self._configure(session)
        return session

    async def _new_session(self) -> KernelSession:
        now = time.monotonic()
        while self._deaths and now - self._deaths[0] > self._death_window:
            self._deaths.popleft()
        if len(self._deaths) >= self._max_deaths:
            raise KernelError(
                f"the Python kernel died {len(self._deaths)} times in the last "
                f"{self._death_window:g} s; not starting another one. Fix the code that crashes "
                "it, then call PyRepl.restart()."
            )
        self._session = None
        self._configured = False
        if self._pool is not None:
            session = await self._pool.acquire()
        else:
            session = await KernelSession.start(
                SessionOptions(self._cwd, self._env, self._startup_timeout)
            )
        self._session = session
        return session

    async def _configure(self, session: KernelSession) -> None:
        bridge = None
        if self._packs:
            if self._bridge is None:
                self._bridge = BridgeServer(lambda: self._packs)
            await self._bridge.open()
            bridge = self._bridge.kernel_config()
        config = {
            "cwd": self._cwd,
            "env": self._env if self._pool is not None else None,
            "memory_limit_mb": self._memory_limit_mb,
            "cpu_time_limit_s": self._cpu_time_limit_s,
            "bridge": bridge,
            "self_reference": self._selfref_namespace,
        }
        try:
            await session.control("configure", config=config)
        except BaseException:
            await session.destroy()
            raise
        self._configured = True

    # -- executing ----------------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        event_emitter: ToolEventEmitter | None = None,
        abort_signal: AbortSignal | None = None,
    ) -> dict[str, Any]:
        """Run ``code`` and return the result dict.

        The dict holds ``success``, ``stdout``, ``stderr``, ``return_value`` (repr of the last
        expression), ``error`` (a readable message that points at the failing line),
        ``error_details`` (``error_type``, ``message``, ``line``, ``column``, ``snippet``,
        ``pointer``, ``summary``, ``user_traceback``), ``execution_time_ms``, ``artifacts``
        (images), ``execution_count``, ``notice`` (set when earlier state was lost) and
        ``output_files`` (full output of cut streams).

        With an ``event_emitter``, output streams as ``kernel_stdout`` / ``kernel_stderr``
        events. When the emitter delivers live (inside a run with events enabled, or built with
        a ``sink``), ``input()`` emits ``kernel_input_request`` (answer with
        :meth:`submit_input`); otherwise ``input()`` fails at once with a clear error.

        Raises:
            KernelError: If no kernel can be started (including after repeated kernel deaths).
        """
        async with self._lock:
            started_at = datetime.now(UTC)
            started = time.perf_counter()
            session = await self._ready_session()
            notice, self._lost = self._lost, None
            self._sequence += 1
            if abort_signal is not None and abort_signal.aborted:
                outcome = CellOutcome(verdict="aborted")
            else:
                run = CellRun(
                    session,
                    code,
                    self._limits,
                    emitter=event_emitter,
                    abort=abort_signal,
                    inputs=self._inputs,
                    allow_input=delivers_live(event_emitter),
                    serve=self._bridge.serve if self._packs and self._bridge else None,
                )
                outcome = await run.run()
            self._after(outcome)
            return await self._finish(
                outcome, code, started_at, started, notice, event_emitter, abort_signal
            )

    def _after(self, outcome: CellOutcome) -> None:
        if outcome.verdict == "died" and not self._closed:
            self._deaths.append(time.monotonic())
            self._lost = _LOST_STATE.format(why="died")
        elif not outcome.recovered:
            self._lost = _LOST_STATE.format(why="did not stop after an interrupt and was killed")

    async def _finish(
        self,
        outcome: CellOutcome,
        code: str,
        started_at: datetime,
        started: float,
        notice: str | None,
        emitter: ToolEventEmitter | None,
        abort: AbortSignal | None,
    ) -> dict[str, Any]:
        audit = self._audit_log()
        sequence = self._sequence
        context = ResultContext(
            limits=self._limits,
            elapsed_ms=(time.perf_counter() - started) * 1000,
            max_output_tokens=self._max_output_tokens,
            spill_paths={s: audit.spill_path(sequence, s) for s in ("stdout", "stderr")},
            notice=notice,
            input_enabled=delivers_live(emitter),
            abort_reason=abort.reason if abort is not None else "",
        )
        result, spills = build_result(outcome, context)
        for spill in spills:
            await audit.write_spill(spill.path, spill.text)
        settings = {
            "execution_timeout_seconds": self._limits.execution_timeout,
            "input_idle_timeout_seconds": self._limits.input_idle_timeout,
            "working_directory": self._cwd,
        }
        await audit.record(
            sequence=sequence, started=started_at, code=code, result=result, settings=settings
        )
        return result

    def submit_input(self, request_id: str, value: str) -> bool:
        """Answer the ``kernel_input_request`` event ``request_id`` with ``value``.

        Returns:
            Whether a pending request took the value (False if it already timed out).
        """
        return self._inputs.submit(request_id, str(value))

    async def interrupt(self) -> None:
        """Interrupt the running execution, if any (like Ctrl-C; state is kept)."""
        if self._session is not None:
            await self._session.interrupt()

    async def reset(self) -> str:
        """Delete every user variable; attached objects and primitives are kept.

        Raises:
            KernelError: If the kernel cannot be reached.
        """
        async with self._lock:
            if self.is_running:
                await self._ready_session()
                assert self._session is not None
                await self._session.control("reset")
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
            session = await self._ready_session()
            variables = await session.control("variables")
            return [{"name": str(v["name"]), "type": str(v["type"])} for v in variables]

    # -- host primitives ----------------------------------------------------------------------

    def install_primitive_pack(self, pack: PrimitivePack) -> None:
        """Make ``pack`` callable from kernel code as ``runtime.<pack.namespace>.<name>(...)``.

        Takes effect at the next execution; replaces a pack with the same namespace.
        """
        self._packs[pack.namespace] = pack
        self._configured = False

    def get_runtime_backend(self, name: str) -> Any:
        """The backend object of the pack installed under namespace ``name`` (or the pack
        itself when it has none); ``None`` when no such pack is installed."""
        pack = self._packs.get(name)
        if pack is None:
            return None
        return pack.backend if pack.backend is not None else pack

    def attach_self_reference(self, obj: Any, *, namespace: str = "selfref") -> None:
        """Attach a SelfReference-like object; kernel code reaches it as ``self_reference``.

        ``self_reference`` in the kernel is ``runtime.<namespace>``: attribute access and calls
        go to the primitives of the pack installed under ``namespace``. If ``obj`` has an
        ``as_primitive_pack()`` method, the pack it returns is installed. Survives ``reset()``.
        """
        self._self_reference = obj
        make_pack = getattr(obj, "as_primitive_pack", None)
        if callable(make_pack):
            pack = make_pack()
            if isinstance(pack, PrimitivePack):
                self.install_primitive_pack(pack)
                namespace = pack.namespace
        self._selfref_namespace = namespace
        self._configured = False

    def __repr__(self) -> str:
        state = "closed" if self._closed else "running" if self.is_running else "not started"
        return f"<PyRepl {self._instance_id} {state} cwd={self._cwd!r}>"
