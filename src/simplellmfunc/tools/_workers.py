"""Warm sandboxed workers: one process per policy serves many tool calls.

Starting a sandboxed Python and importing a tool's module costs most of a second; a worker pays
it once. It runs ``simplellmfunc.sandbox._worker`` under the policy and forks a child per call
(fresh state and limits each time). Workers are kept per :class:`WorkerKey` (policy, workspace,
code paths, isolation): a call takes an idle one or starts one, and gives it back afterwards,
unless the call was cut short (timeout, cancellation) or the worker died, in which case it is
killed and the next call starts a new one. Parallel calls use parallel workers; at most
``MAX_IDLE`` per key wait for the next call. Workers are killed at interpreter exit (an
``atexit`` hook installed with the first worker) or by :meth:`WorkerPool.close`.

Starting and killing workers blocks (process starts and waits): do it in worker threads.
:meth:`Worker.call` runs on the event loop (non-blocking pipes), and :meth:`WorkerPool.idle` and
:meth:`WorkerPool.keep` never block, so a warm call never crosses to a thread.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

import anyio

from ..sandbox import (
    Isolation,
    SandboxPolicy,
    clean_environment,
    import_paths,
    kill_spawned,
    marker_entry,
    sandbox_argv,
)

__all__ = ["MAX_IDLE", "WORKERS", "Worker", "WorkerKey", "WorkerPool"]

#: Idle workers kept per key.
MAX_IDLE = 2
_LOG_TAIL = 2000
_ENVELOPE = 64  # room for the reply's JSON around the result


@dataclass(frozen=True, slots=True)
class WorkerKey:
    """What a worker is started with; calls with an equal key share workers."""

    policy: SandboxPolicy
    workspace: str | None
    binds: tuple[str, ...]
    paths: tuple[str, ...]
    isolated: Isolation


class Worker:
    """One warm worker process (started by the constructor)."""

    def __init__(self, key: WorkerKey) -> None:
        self.key = key
        self.private = tempfile.mkdtemp(prefix="slf-tool-")
        self.workspace = key.workspace or os.path.join(self.private, "work")
        os.makedirs(self.workspace, exist_ok=True)
        paths = import_paths(os.environ.get("PYTHONPATH", ""))
        policy = key.policy
        command = [sys.executable, "-m", "simplellmfunc.sandbox._worker"]
        if key.isolated.binary is not None:
            command.append("--pid-namespace")
        if policy.memory_mb is not None:
            command += ["--call-memory-mb", str(policy.memory_mb)]
        if policy.max_open_files is not None:
            command += ["--call-files", str(policy.max_open_files)]
        if not policy.allow_subprocess:
            command.append("--no-processes")
        argv = sandbox_argv(
            policy, command, workspace=self.workspace, isolated=key.isolated,
            code=paths, read_only=key.binds, worker=True,
        )  # fmt: skip
        #: Ties the worker and what its calls spawn to it (the fallback's last sweep).
        self.token = os.path.basename(self.private)
        env = {**clean_environment(policy.env), "HOME": self.workspace}
        env.update(marker_entry(self.token))
        env["PYTHONPATH"] = os.pathsep.join([*paths, *key.paths])
        self._log = os.path.join(self.private, "worker.log")
        with open(self._log, "wb") as log:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                env=env, cwd=self.workspace, start_new_session=True,
            )  # fmt: skip

        #: The (module, qualname) pairs this worker has imported.
        self.loaded: set[tuple[str, str]] = set()
        self._nonblocking = False

    async def load(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """Have the worker import the tool of ``request`` (once); its reply, None if it died."""
        target = (str(request["module"]), str(request["qualname"]))
        if target in self.loaded:
            return {"ok": True, "result": None}
        reply = await self.call({**request, "op": "load", "arguments": None})
        if reply is not None and reply.get("ok"):
            self.loaded.add(target)
        return reply

    @property
    def alive(self) -> bool:
        """Whether the worker process still runs."""
        return self.process.poll() is None

    async def call(self, request: dict[str, Any]) -> dict[str, Any] | None:
        """Send one request and wait for its reply (None: the worker died).

        On the event loop, no thread: a thread's wake-ups would be most of a warm call's cost.
        A call cut short (cancelled, timed out) leaves the worker in an unknown state: the
        caller kills it.
        """
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        cap = self.key.policy.max_output_bytes
        limit = None if cap is None else cap + _ENVELOPE
        try:
            if not self._nonblocking:
                os.set_blocking(stdin.fileno(), False)
                os.set_blocking(stdout.fileno(), False)
                self._nonblocking = True
            pending = memoryview(json.dumps(request).encode() + b"\n")
            while pending:
                try:
                    pending = pending[os.write(stdin.fileno(), pending) :]
                except BlockingIOError:
                    await anyio.wait_writable(stdin.fileno())
            line = bytearray()
            while not line.endswith(b"\n"):
                try:
                    chunk = os.read(stdout.fileno(), 1 << 16)
                except BlockingIOError:
                    await anyio.wait_readable(stdout.fileno())
                    continue
                if not chunk:
                    return None  # the worker died
                line += chunk
                if limit is not None and len(line) > limit:
                    # Over the cap: never read whole into this process; the caller kills us.
                    return {"ok": False, "too_large": True}
        except (OSError, ValueError):  # a broken pipe, or closed by kill() meanwhile
            return None
        if self.key.workspace is None and _has_entries(self.workspace):
            # Each call finds the private workspace empty (in a thread: it may be large).
            await anyio.to_thread.run_sync(_empty, self.workspace)
        reply = json.loads(bytes(line))
        return reply if isinstance(reply, dict) else None

    def log_tail(self) -> str:
        """The last lines the worker itself wrote (``":\\n..."``, or "" when none)."""
        try:
            with open(self._log, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - _LOG_TAIL))
                text = handle.read().decode("utf-8", errors="replace").strip()
        except OSError:
            return ""
        return f":\n{text}" if text else ""

    def kill(self) -> None:
        """Kill the worker and everything in its sandbox; remove its files. Idempotent."""

        def kill_group() -> None:
            with contextlib.suppress(OSError):
                # Its own process group: bwrap (whose namespace dies with it) or, without
                # bubblewrap, the worker (its call children die with it: PR_SET_PDEATHSIG).
                os.killpg(self.process.pid, signal.SIGKILL)

        # Without bubblewrap, also what the worker's calls detached (the marker, parentage).
        kill_spawned(self.process.pid, self.token, kill_group)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        shutil.rmtree(self.private, ignore_errors=True)


def _has_entries(folder: str) -> bool:
    try:
        with os.scandir(folder) as entries:
            return next(entries, None) is not None
    except OSError:
        return False


def _empty(folder: str) -> None:
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


class WorkerPool:
    """Warm workers by key (thread-safe)."""

    def __init__(self) -> None:
        self._idle: dict[WorkerKey, list[Worker]] = {}
        self._live: set[Worker] = set()
        self._lock = threading.Lock()
        self._hooked = False

    def idle(self, key: WorkerKey) -> Worker | None:
        """An idle live worker for ``key`` that needs nothing killed first (never blocks)."""
        with self._lock:
            idle = self._idle.get(key)
            if idle and idle[-1].alive:
                return idle.pop()
        return None

    def acquire(self, key: WorkerKey) -> Worker:
        """An idle worker for ``key``, or a new one."""
        stale: list[Worker] = []
        found = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and found is None:
                worker = idle.pop()
                if worker.alive:
                    found = worker
                else:
                    stale.append(worker)
            if not self._hooked:
                self._hooked = True
                atexit.register(self.close)
        for worker in stale:
            self._forget(worker)
        if found is not None:
            return found
        worker = Worker(key)
        with self._lock:
            self._live.add(worker)
        return worker

    def keep(self, worker: Worker) -> bool:
        """Put a healthy ``worker`` back among the idle ones, if there is room (never blocks)."""
        if worker.alive:
            with self._lock:
                idle = self._idle.setdefault(worker.key, [])
                if len(idle) < MAX_IDLE:
                    idle.append(worker)
                    return True
        return False

    def release(self, worker: Worker, healthy: bool) -> None:
        """Give ``worker`` back after a call (``healthy`` False: kill it)."""
        if not (healthy and self.keep(worker)):
            self._forget(worker)

    def close(self, policy: SandboxPolicy | None = None) -> None:
        """Kill the idle workers (of ``policy`` only, if given); at exit, every worker."""
        with self._lock:
            if policy is None:
                doomed = list(self._live)
                self._idle.clear()
            else:
                doomed = []
                for key in [k for k in self._idle if k.policy == policy]:
                    doomed += self._idle.pop(key)
        for worker in doomed:
            self._forget(worker)

    def live_count(self) -> int:
        """How many workers run (for tests and diagnostics)."""
        with self._lock:
            return len(self._live)

    def _forget(self, worker: Worker) -> None:
        with self._lock:
            self._live.discard(worker)
        worker.kill()


#: The process's warm workers.
WORKERS = WorkerPool()
