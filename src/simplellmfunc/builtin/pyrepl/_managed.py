"""The kernel behind one PyRepl: started or taken from a pool, configured, replaced when lost.

``ManagedKernel`` hands out a ready :class:`KernelSession`, applies the instance's configuration
(working directory, limits, bridge, self-reference) whenever it changed or the kernel is new,
remembers that state was lost so that the next execution is told, and stops replacing a kernel
that keeps dying (a circuit breaker) instead of looping.

Whoever destroys a session says why (``KernelSession.destroy(why)``): a cell that died or did not
stop, a cancelled caller, a failed configuration. :meth:`ManagedKernel.ready` turns the reason of
the session it replaces into the one notice of the next execution, so no path that replaces a
kernel can forget to say so.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from ...exceptions import ArgumentValueError, KernelError
from ...sandbox import SandboxPolicy
from ._bridge import BridgeServer
from ._exec import CellOutcome
from ._pack import PrimitivePack
from ._pool import KernelPool
from ._session import KernelSession, SessionOptions

__all__ = ["KernelSettings", "ManagedKernel"]

_LOST_STATE = (
    "This code ran in a fresh Python kernel: the previous kernel {why}, so every variable, "
    "import and definition from earlier executions is gone."
)


@dataclass(frozen=True, slots=True)
class KernelSettings:
    """How the kernels of one PyRepl are started: ``PyRepl(kernel=KernelSettings(...))``.

    The flat ``PyRepl`` keywords (``working_directory``, ``env=``, ``memory_limit_mb=``,
    ``sandbox=``...) override the matching field when given.

    Attributes:
        cwd: The kernel's working directory (None: with a sandbox, a private directory that
            lives as long as the kernel; without, the current directory).
        env: Environment variables for the kernel, on top of a small allowlist of the host's.
        memory_limit_mb: Address-space limit of the kernel process (``RLIMIT_AS``), if any.
        cpu_time_limit_s: CPU-time limit of the kernel process in seconds (``RLIMIT_CPU``).
        pool: A started :class:`KernelPool` to take a pre-started kernel from.
        startup_timeout: Seconds a kernel may take to start.
        max_deaths: Kernel deaths within ``death_window`` seconds after which executions raise
            :class:`KernelError` instead of starting yet another kernel.
        death_window: The window of ``max_deaths``, in seconds.
        sandbox: The kernel's sandbox policy (default: the default
            :class:`~simplellmfunc.sandbox.SandboxPolicy`; None: no sandbox).

    Raises:
        ArgumentValueError: For a non-positive timeout, window or death count.
    """

    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    memory_limit_mb: int | None = None
    cpu_time_limit_s: int | None = None
    pool: KernelPool | None = None
    startup_timeout: float = 60.0
    max_deaths: int = 3
    death_window: float = 300.0
    sandbox: SandboxPolicy | None = field(default_factory=SandboxPolicy)

    def __post_init__(self) -> None:
        for name in ("startup_timeout", "death_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ArgumentValueError(
                    f"KernelSettings.{name} must be a positive number of seconds, got {value!r}"
                )
        if (
            isinstance(self.max_deaths, bool)
            or not isinstance(self.max_deaths, int)
            or self.max_deaths < 1
        ):
            raise ArgumentValueError(
                f"KernelSettings.max_deaths must be a positive int, got {self.max_deaths!r}"
            )


class ManagedKernel:
    """Owns the current session, the bridge and the installed primitive packs."""

    def __init__(self, settings: KernelSettings) -> None:
        self.settings = settings
        self.session: KernelSession | None = None
        self.packs: dict[str, PrimitivePack] = {}
        self.selfref_namespace: str | None = None
        self.closed = False
        self._configured = False
        self._bridge: BridgeServer | None = None
        self._deaths: deque[float] = deque()
        self._lost: str | None = None

    @property
    def cwd(self) -> str | None:
        """The kernel's working directory: the given one, or the running kernel's workspace."""
        if self.settings.cwd is not None:
            return self.settings.cwd
        return self.session.workspace if self.session is not None else None

    @property
    def running(self) -> bool:
        """Whether a kernel process is (believed to be) running."""
        return self.session is not None and not self.session.closed

    def invalidate(self) -> None:
        """The configuration changed: apply it again before the next use."""
        self._configured = False

    def take_notice(self) -> str | None:
        """The lost-state message for the next execution (returned once)."""
        notice, self._lost = self._lost, None
        return notice

    def serve(self) -> Callable[..., Coroutine[Any, Any, None]] | None:
        """What to run beside a cell so that kernel code can call the host (None: no packs)."""
        return self._bridge.serve if self.packs and self._bridge is not None else None

    async def ready(self) -> KernelSession:
        """A running, configured session (starting or replacing the kernel if needed).

        Raises:
            KernelError: If closed, after repeated deaths, or if no kernel can start.
        """
        if self.closed:
            raise KernelError("this PyRepl is closed")
        session = self.session
        if session is not None and not session.closed and not await session.is_alive():
            # It exited between executions (a crash in a background thread, os._exit in one).
            await session.destroy("exited between executions")
        if session is not None and session.closed:
            self._lost = _LOST_STATE.format(why=session.ended or "was shut down")
            session = self.session = None
        if session is None:
            session = await self._replace()
        if not self._configured:
            await self._configure(session)
        return session

    def record(self, outcome: CellOutcome) -> None:
        """Count an execution that killed its kernel (for the circuit breaker)."""
        if outcome.verdict == "died" and not self.closed:
            self._deaths.append(time.monotonic())

    async def restart(self) -> None:
        """Destroy the current kernel and forget past deaths (the next use starts a new one)."""
        self._deaths.clear()
        session = self.session
        if session is not None:
            await session.destroy("was restarted (PyRepl.restart())")

    async def close(self) -> None:
        """Destroy the kernel and the bridge; idempotent and shielded."""
        self.closed = True
        with anyio.CancelScope(shield=True):
            session, self.session = self.session, None
            if session is not None:
                await session.destroy()
            bridge, self._bridge = self._bridge, None
            if bridge is not None:
                await bridge.close()

    def close_now(self) -> None:
        """:meth:`close` without an event loop (blocking); idempotent, never raises."""
        self.closed = True
        session, self.session = self.session, None
        if session is not None:
            session.destroy_now()
        bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close_now()

    async def _replace(self) -> KernelSession:
        settings = self.settings
        now = time.monotonic()
        while self._deaths and now - self._deaths[0] > settings.death_window:
            self._deaths.popleft()
        if len(self._deaths) >= settings.max_deaths:
            raise KernelError(
                f"the Python kernel died {len(self._deaths)} times in the last "
                f"{settings.death_window:g} s; not starting another one. Fix the code that "
                "crashes it, then call PyRepl.restart()."
            )
        self.session = None
        self._configured = False
        if settings.cwd is not None and not await anyio.Path(settings.cwd).is_dir():
            raise KernelError(
                f"the PyRepl working directory {settings.cwd!r} does not exist (or is not a "
                "directory): create it, or pass an existing working_directory= to PyRepl"
            )
        pool = settings.pool
        if pool is not None and (pool.fits(settings.cwd, settings.sandbox) or not pool.is_open):
            # acquire() raises for a pool that is not open, even one whose kernels do not fit.
            session = await pool.acquire()
        else:
            options = SessionOptions(
                settings.cwd, settings.env, settings.startup_timeout, settings.sandbox
            )
            session = await KernelSession.start(options)
        if self.closed:
            # close() ran while the kernel was starting: it must not outlive the instance.
            await session.destroy()
            raise KernelError("this PyRepl is closed")
        self.session = session
        return session

    async def _configure(self, session: KernelSession) -> None:
        settings = self.settings
        bridge = None
        if self.packs:
            if self._bridge is None:
                self._bridge = BridgeServer(lambda: self.packs)
            await self._bridge.open(session.private_dir if session.isolated else None)
            bridge = self._bridge.kernel_config()
        config = {
            "cwd": settings.cwd or session.workspace,
            # A pooled kernel started with the pool's environment: add this instance's.
            "env": dict(settings.env) if settings.pool is not None else None,
            "memory_limit_mb": settings.memory_limit_mb,
            "cpu_time_limit_s": settings.cpu_time_limit_s,
            "bridge": bridge,
            "self_reference": self.selfref_namespace,
        }
        try:
            await session.control("configure", config=config)
        except BaseException:  # boundary: cleanup, re-raised: the kernel is shut down
            await session.destroy("could not be configured and was shut down")
            raise
        self._configured = True
