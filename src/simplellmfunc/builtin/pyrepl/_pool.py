"""``KernelPool``: kernels started ahead of time, so a new PyRepl is ready at once."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from ..._resource import AsyncResource
from ...exceptions import KernelError
from ...sandbox import SandboxPolicy, as_policy
from ._session import KernelSession, SessionOptions

__all__ = ["KernelPool"]

_REPLACE_AFTER_SECONDS = 0.1


class KernelPool(AsyncResource):
    """Keeps ``size`` idle kernels started; ``PyRepl(pool=pool)`` takes one instead of starting.

    Use it as an async context manager: entering starts the kernels in the background, leaving
    shuts the idle ones down (kernels already taken belong to their PyRepl). Each taken kernel is
    replaced in the background. A PyRepl configures the kernel it takes (working directory,
    ``env`` entries set in ``os.environ``, resource limits); interpreter-start variables such as
    ``PYTHONPATH`` come from the pool's own ``env``.

    Args:
        size: How many idle kernels to keep ready.
        env: Extra environment for the pooled kernels (on top of the host allowlist).
        startup_timeout_seconds: How long a kernel may take to start.
        sandbox: The policy of the pooled kernels (``True``, the default: the default policy;
            ``False``: none), as for :class:`PyRepl`. A sandboxed kernel sees only the workspace it
            was started with: the pool's ``working_directory``, or a private one per kernel when
            None. A PyRepl whose policy or working directory does not fit starts its own kernel.
        working_directory: The pooled kernels' workspace (default: the current directory
            without a sandbox, a private one per kernel with one).

    Raises:
        KernelError: From :meth:`acquire` when the pool is not open.
    """

    def __init__(
        self,
        size: int = 2,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout_seconds: float = 60.0,
        sandbox: SandboxPolicy | bool = True,
        working_directory: str | os.PathLike[str] | None = None,
    ) -> None:
        self.size = max(1, size)
        policy = as_policy(sandbox)
        cwd = working_directory if working_directory is not None or policy else os.getcwd()
        self._options = SessionOptions(
            None if cwd is None else str(Path(cwd).absolute()),
            dict(env or {}),
            startup_timeout_seconds,
            policy,
        )
        self._ready: list[KernelSession] = []
        self._starting = 0
        self._changed = anyio.Event()
        self._tg: TaskGroup | None = None
        self._failure: BaseException | None = None

    @property
    def idle(self) -> int:
        """How many started kernels are waiting to be taken."""
        return len(self._ready)

    @property
    def is_open(self) -> bool:
        """Whether the pool is open (inside ``async with``)."""
        return self._tg is not None

    def fits(self, cwd: str | None, sandbox: SandboxPolicy | None) -> bool:
        """Whether a PyRepl with this working directory and policy can take a pooled kernel."""
        options = self._options
        if sandbox != options.sandbox:
            return False
        return sandbox is None or cwd is None or cwd == options.cwd

    async def open(self) -> None:
        """Start the kernels in the background (``async with`` does; a no-op when open)."""
        if self._tg is not None:
            return
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        for _ in range(self.size):
            self._spawn()

    async def aclose(self) -> None:
        """Stop starting kernels and shut the idle ones down (idempotent)."""
        tg, self._tg = self._tg, None
        if tg is not None:
            tg.cancel_scope.cancel()
            await tg.__aexit__(None, None, None)
        with anyio.CancelScope(shield=True):
            ready, self._ready = self._ready, []
            for session in ready:
                await session.destroy()

    async def wait_ready(self) -> None:
        """Wait until ``size`` kernels are idle (or a start failed)."""
        while len(self._ready) < self.size and self._failure is None and self._tg is not None:
            await self._wait_change()

    async def acquire(self) -> KernelSession:
        """Take a started kernel (waiting for one being started, or starting one directly).

        Raises:
            KernelError: If the pool is closed, or no kernel can start.
        """
        if self._tg is None:
            raise KernelError("the kernel pool is not open: use `async with KernelPool()`")
        while not self._ready and self._starting and self._failure is None:
            await self._wait_change()
        if self._ready:
            session = self._ready.pop(0)
            # The replacement starts a little later: its launch (command line, process start)
            # runs on this event loop and would otherwise delay the taken kernel's set-up.
            self._spawn(_REPLACE_AFTER_SECONDS)
            try:
                alive = not session.closed and await session.is_alive()
            except BaseException:  # boundary: cleanup, re-raised: the kernel is destroyed
                # Cancelled while checking: the kernel is out of the pool and nobody's yet.
                await session.destroy()
                raise
            if alive:
                return session
            await session.destroy()
        return await KernelSession.start(self._options)

    def _spawn(self, delay: float = 0.0) -> None:
        if self._tg is None or len(self._ready) + self._starting >= self.size:
            return
        self._starting += 1
        self._tg.start_soon(self._start_one, delay)

    async def _start_one(self, delay: float = 0.0) -> None:
        try:
            if delay:
                await anyio.sleep(delay)
            session = await KernelSession.start(self._options)
        except KernelError as exc:
            # Remember the failure so that acquire() stops waiting; PyRepl will start directly
            # and report the error itself.
            self._failure = exc
            return
        finally:
            self._starting -= 1
            self._notify()
        if self._tg is None:
            await session.destroy()
            return
        self._ready.append(session)
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _wait_change(self) -> None:
        await self._changed.wait()
