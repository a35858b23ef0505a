"""One kernel process: start it, talk to it, interrupt it, and destroy it without leaks.

A session owns a private directory (mode 0700) holding the connection file, the IPC sockets,
the kernel's temp dir, its IPython dir and its log. Destroying the session kills the kernel's
process group and whatever the kernel spawned, detached processes included (see ``_procs``), and
removes the directory.
"""

from __future__ import annotations

import ast
import contextlib
import hmac
import json
import logging
import os
import queue
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import anyio
import anyio.to_thread
import zmq
from jupyter_client.adapter import adapt
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager

from ...exceptions import KernelError
from ...sandbox import Isolation, SandboxPolicy, import_paths, sandbox_argv, usable, warning_event
from . import _reaper
from ._env import kernel_environment

__all__ = ["KernelSession", "SessionOptions"]

logger = logging.getLogger("simplellmfunc.pyrepl")

_IN_KERNEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_in_kernel")
_ALIAS = "_simplellmfunc_kernel"
# Imports the kernel-side modules (the ``_in_kernel`` folder) under an alias package whose __path__
# is that folder, so the kernel never imports simplellmfunc itself (nor httpx, pydantic,
# jupyter_client...).
_LOADER_SOURCE = f"""
import importlib, sys, types
if {_ALIAS!r} not in sys.modules:
    package = types.ModuleType({_ALIAS!r})
    package.__path__ = [{_IN_KERNEL!r}]
    sys.modules[{_ALIAS!r}] = package
importlib.import_module({_ALIAS!r} + "._boot")
"""
# Run in a throwaway namespace so that no loader name lands among the user's variables.
_LOADER = f"exec({_LOADER_SOURCE!r}, {{}})"
_CONTROL = f"__import__({_ALIAS + '._boot'!r}, fromlist=['control']).control"
_KERNEL_ARGS = ("--HistoryManager.enabled=False", "--IPKernelApp.capture_fd_output=True")
_CLEANUP_BOUND = 10.0
# bwrap's exit code for a command killed by signal N is _BY_SIGNAL + N (as a shell's).
_BY_SIGNAL = 128
# A Jupyter message: signature, header, parent header, metadata, content (then buffers).
_PARTS = 5


_KERNEL_ARGV = (sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}")


class _SpecManager(KernelSpecManager):
    """Always the ipykernel of the running interpreter, whatever kernelspecs are installed.

    In a sandbox, the kernel's argv is wrapped (``bwrap ... -- launcher -- python -m
    ipykernel_launcher``) and interrupts go as messages on the control channel: a SIGINT to
    the process Jupyter started would reach bwrap, not the kernel.
    """

    def __init__(self, argv: list[str], interrupt_mode: str) -> None:
        super().__init__()
        self._argv = argv
        self._interrupt_mode = interrupt_mode

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(
            argv=self._argv,
            display_name="Python",
            language="python",
            interrupt_mode=self._interrupt_mode,
        )


@dataclass(frozen=True, slots=True)
class SessionOptions:
    """How to start a kernel process.

    ``cwd`` None means a private workspace (``<private dir>/work``) that lives as long as the
    kernel; ``sandbox`` None means no sandbox (the kernel runs as the host's user, in ``cwd``).
    """

    cwd: str | None
    env: Mapping[str, str] | None = None
    startup_timeout: float = 60.0
    sandbox: SandboxPolicy | None = None


def _make_private_dir() -> str:
    path = _reaper.make_private_dir("slf-kernel-")
    os.mkdir(os.path.join(path, "tmp"))
    os.mkdir(os.path.join(path, "work"))
    return path


def _workspace(options: SessionOptions, private_dir: str) -> str:
    """The kernel's working directory: the given one, or its private workspace."""
    return options.cwd or os.path.join(private_dir, "work")


def _kernel_argv(
    options: SessionOptions, isolated: Isolation | None, private_dir: str, env: Mapping[str, str]
) -> list[str]:
    if options.sandbox is None or isolated is None:
        return list(_KERNEL_ARGV)
    return sandbox_argv(
        options.sandbox,
        _KERNEL_ARGV,
        workspace=_workspace(options, private_dir),
        isolated=isolated,
        writable=[private_dir],
        read_only=[_IN_KERNEL],
        code=import_paths(env.get("PYTHONPATH", "")),
        # ipykernel exits when its parent is not JPY_PARENT_PID; inside, its parent is bwrap.
        unset=["JPY_PARENT_PID"],
    )


class KernelSession:
    """A running kernel and its client; create with :meth:`start`."""

    def __init__(
        self, km: Any, client: Any, private_dir: str, options: SessionOptions, isolated: bool
    ) -> None:
        self.km = km
        self.client = client
        self.private_dir = private_dir
        #: The kernel's working directory at start (its private workspace when none was given).
        self.workspace = _workspace(options, private_dir)
        #: The policy it runs under (None: none), and whether bubblewrap isolates it.
        self.sandbox = options.sandbox
        self.isolated = isolated
        self.pid: int = km.provisioner.pid
        self.pgid: int | None = km.provisioner.pgid
        self.live = _reaper.LiveKernel(self.pid, self.pgid, private_dir)
        self.fd_capture = False
        #: The ``sandbox_warning`` event's data when this kernel misses some isolation (None:
        #: none missing), and whether it was emitted (once per kernel, on its first execution).
        self.warning: dict[str, object] | None = None
        self.warned = False
        self.closed = False
        #: Why the session was destroyed (completes "the previous kernel ..."); None while open.
        self.ended: str | None = None

    @classmethod
    async def start(cls, options: SessionOptions) -> KernelSession:
        """Start a kernel, wait until it answers and load the kernel-side bootstrap.

        Raises:
            KernelError: If the kernel does not start or answer within ``startup_timeout``.
        """
        isolated = None
        if options.sandbox is not None:
            isolated = await anyio.to_thread.run_sync(usable, options.sandbox, "kernel")
        private_dir = await anyio.to_thread.run_sync(_make_private_dir)
        env = kernel_environment(private_dir, options.env, home=options.sandbox is not None)
        argv = _kernel_argv(options, isolated, private_dir, env)
        in_bwrap = isolated is not None and isolated.binary is not None
        km = _manager(private_dir, argv, "message" if in_bwrap else "signal")
        session: KernelSession | None = None
        try:
            log = await anyio.to_thread.run_sync(_open_log, private_dir)
            try:
                # Shielded: cancelled midway, the manager may not know the process it
                # launched yet, and nothing could stop it (launching is quick; waiting for
                # the kernel to answer, below, stays cancellable).
                with anyio.CancelScope(shield=True):
                    await km.start_kernel(
                        cwd=_workspace(options, private_dir), env=env,
                        extra_arguments=list(_KERNEL_ARGS), stdout=log, stderr=log,
                    )  # fmt: skip
            finally:
                log.close()
            client = km.client()
            _no_linger(client.context)
            client.start_channels(hb=False, control=False)
            session = cls(km, client, private_dir, options, in_bwrap)
            if options.sandbox is not None and isolated is not None:
                session.warning = warning_event(isolated, options.sandbox)
            _reaper.register(session.live)
            with anyio.fail_after(options.startup_timeout):
                await client.wait_for_ready(timeout=options.startup_timeout)
                info = await session.control("install", code=_LOADER)
            session.fd_capture = bool(info.get("fd_capture"))
            return session
        except BaseException as exc:  # boundary: cleanup, re-raised: the kernel started is stopped
            # Shielded: a start cancelled midway (a pool closing during a refill) must still
            # stop the kernel it launched.
            with anyio.CancelScope(shield=True):
                tail = await _log_tail(private_dir)
                if session is not None:
                    await session.destroy()
                else:
                    await _destroy_unstarted(km, private_dir)
            if isinstance(exc, TimeoutError):
                why = f"it did not answer within {options.startup_timeout:g} s"
                raise KernelError(f"the Python kernel failed to start: {why}{tail}") from exc
            if isinstance(exc, Exception) and not isinstance(exc, KernelError):
                raise KernelError(f"the Python kernel failed to start: {exc}{tail}") from exc
            raise

    async def request(
        self, code: str, *, user_expressions: Mapping[str, str], timeout: float
    ) -> dict[str, Any]:
        """Run a silent execute request and return its reply content.

        Raises:
            KernelError: On timeout (the kernel is busy or gone).
        """
        msg_id = self.client.execute(
            code, silent=True, store_history=False,
            user_expressions=dict(user_expressions), allow_stdin=False,
        )  # fmt: skip
        return await self.reply(msg_id, timeout)

    @staticmethod
    async def next_message(channel: Any, timeout: float | None) -> dict[str, Any]:
        """The next message of a client ``channel`` (``iopub_channel``, ``shell_channel``).

        One already waiting is read at once (a non-blocking receive, which never gives up the
        event loop); only when none is there does it poll (``None``: without a timeout) and
        then receive without blocking, so that a cancelled wait never loses a message. Decoded
        by :func:`_decode` (no date parsing).

        Raises:
            queue.Empty: If none arrives within ``timeout`` seconds.
        """
        socket = channel.socket
        while True:
            try:
                frames = await socket.recv_multipart(zmq.DONTWAIT)
            except zmq.Again:
                pass
            else:
                return _decode(channel.session, frames)
            wait = None if timeout is None else max(int(timeout * 1000), 0)
            if not await socket.poll(wait, zmq.POLLIN):
                raise queue.Empty

    async def reply(self, msg_id: str, timeout: float) -> dict[str, Any]:
        """Wait for the shell reply to ``msg_id`` (older replies are discarded).

        Raises:
            KernelError: If it does not arrive within ``timeout`` seconds.
        """
        deadline = anyio.current_time() + timeout
        # A timed read rather than a cancel scope: no scope to enter and leave per execution.
        while (remaining := deadline - anyio.current_time()) > 0:
            try:
                msg = await self.next_message(self.client.shell_channel, remaining)
            except queue.Empty:
                break
            if msg["parent_header"].get("msg_id") == msg_id:
                return dict(msg["content"])
        raise KernelError(f"the kernel did not reply within {timeout:g} s")

    async def control(
        self, op: str, *, code: str = "", timeout: float = 30.0, **fields: Any
    ) -> Any:
        """Call the kernel-side ``control`` with ``{"op": op, **fields}``; return its result.

        Raises:
            KernelError: If the kernel fails the command or does not answer.
        """
        request = json.dumps({"op": op, **fields})
        expression = f"{_CONTROL}({request!r})"
        content = await self.request(code, user_expressions={"r": expression}, timeout=timeout)
        if content.get("status") != "ok":
            raise KernelError(
                f"kernel command {op!r} failed: {content.get('ename')}: {content.get('evalue')}"
            )
        value = content.get("user_expressions", {}).get("r", {})
        if value.get("status") != "ok":
            raise KernelError(
                f"kernel command {op!r} failed: {value.get('ename')}: {value.get('evalue')}"
            )
        answer = json.loads(ast.literal_eval(value["data"]["text/plain"]))
        if not answer.get("ok"):
            raise KernelError(f"kernel command {op!r} failed: {answer.get('error')}")
        return answer.get("result")

    async def is_alive(self) -> bool:
        """Whether the kernel process is still running."""
        return not self.closed and bool(await self.km.is_alive())

    async def exit_description(self) -> str:
        """Describe how the kernel process ended (exit code or signal), plus its last log lines."""
        code = await self.km.provisioner.poll() if self.km.provisioner else None
        if code is not None and self.isolated and code > _BY_SIGNAL:
            # The process Jupyter started is bwrap: it exits with 128 + N when the kernel is
            # killed by signal N (a kernel exiting with such a code on purpose reads as a signal).
            code = _BY_SIGNAL - code
        if code is None:
            how = "it stopped responding"
        elif code < 0:
            how = f"killed by signal {_signal_name(-code)}"
        else:
            how = f"exit code {code}"
        return how + await _log_tail(self.private_dir)

    async def interrupt(self) -> None:
        """Send SIGINT to the kernel's process group (KeyboardInterrupt in the running cell)."""
        if not self.closed:
            try:
                await self.km.interrupt_kernel()
            except (
                Exception
            ) as exc:  # boundary: a dead kernel cannot be interrupted; death is handled
                logger.debug("interrupting the kernel failed: %r", exc)

    async def destroy(self, why: str = "was shut down") -> None:
        """Kill the kernel's process group and remove every file; idempotent, never raises.

        Runs shielded with a bound so that a cancelled caller still leaves nothing behind.

        Args:
            why: Why, for the notice of the next execution (it completes "the previous kernel
                ..."); the first call's reason is kept in :attr:`ended`.
        """
        if self.closed:
            return
        self.closed = True
        self.ended = why
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_BOUND):
            # First, while the kernel may still run: its descendants are found by parentage.
            await anyio.to_thread.run_sync(_reaper.kill_kernel, self.live)
            try:
                self.client.stop_channels()
                await self.km.shutdown_kernel(now=True)
            except Exception as exc:  # boundary: the processes are killed already
                logger.debug("kernel shutdown failed after killing it: %r", exc)
            await anyio.to_thread.run_sync(shutil.rmtree, self.private_dir, True)
        _destroy_contexts(self.client.context, self.km.context)
        _reaper.unregister(self.pid)

    def destroy_now(self, why: str = "was shut down") -> None:
        """:meth:`destroy` without an event loop: kill the processes, close the sockets with
        no linger, remove the files (blocking; for a synchronous close and for garbage
        collection). Idempotent, never raises."""
        if self.closed:
            return
        self.closed = True
        self.ended = why
        _reaper.kill_kernel(self.live)
        with contextlib.suppress(Exception):
            self.client.stop_channels()
        _destroy_contexts(self.client.context, self.km.context)
        _reaper.reap(self.pid)
        shutil.rmtree(self.private_dir, ignore_errors=True)
        _reaper.unregister(self.pid)


def _decode(session: Any, frames: list[bytes]) -> dict[str, Any]:
    """``session.deserialize`` of a received message, without parsing the ISO dates of its
    headers into ``datetime`` objects (jupyter_client runs a regular expression over every
    header string and ``dateutil`` over the dates: a fifth of the host's CPU per execution,
    for dates nothing here reads; ``header["date"]`` stays a string). The signature is
    checked (and remembered against replays) exactly as there; a message that fails a check
    goes to ``deserialize`` itself, which raises its error, and so does one that would fill
    the replay history (``deserialize`` culls it): only the session's public attributes are
    used here.
    """
    _, parts = session.feed_identities(frames)
    if len(parts) < _PARTS:
        return cast("dict[str, Any]", session.deserialize(parts))
    if session.auth is not None:
        signature = parts[0]
        if (
            not signature
            or signature in session.digest_history
            or not hmac.compare_digest(signature, session.sign(parts[1:_PARTS]))
            or len(session.digest_history) >= session.digest_history_size
        ):
            return cast("dict[str, Any]", session.deserialize(parts))
        session.digest_history.add(signature)
    unpack = session.unpack
    header = unpack(parts[1])
    message = {
        "header": header,
        "msg_id": header["msg_id"],
        "msg_type": header["msg_type"],
        "parent_header": unpack(parts[2]),
        "metadata": unpack(parts[3]),
        "content": unpack(parts[4]),
        "buffers": [memoryview(part) for part in parts[_PARTS:]],
    }
    return adapt(message)


def _manager(private_dir: str, argv: list[str], interrupt_mode: str) -> Any:
    options: dict[str, Any] = {
        "kernel_spec_manager": _SpecManager(argv, interrupt_mode),
        "kernel_name": "python3",
        "connection_file": os.path.join(private_dir, "kernel.json"),
    }
    if os.name == "posix":
        # Unix sockets in the private directory: no TCP ports to race for or to expose.
        options.update(transport="ipc", ip=os.path.join(private_dir, "ipc"))
    km = AsyncKernelManager(**options)
    _no_linger(km.context)
    return km


def _no_linger(context: Any) -> None:
    """Sockets of ``context`` drop unsent messages when closed: terminating the context (at
    garbage collection, at interpreter exit) then never waits for a kernel that is gone.
    (libzmq's default, wait forever, blocked whole processes in ``zmq_ctx_term``.)"""
    context.setsockopt(zmq.LINGER, 0)


def _destroy_contexts(*contexts: Any) -> None:
    for context in contexts:
        with contextlib.suppress(Exception):
            if not context.closed:
                context.destroy(linger=0)


def _open_log(private_dir: str) -> Any:
    return open(os.path.join(private_dir, "kernel.log"), "ab")


async def _log_tail(private_dir: str, lines: int = 15) -> str:
    def read() -> str:
        try:
            with open(os.path.join(private_dir, "kernel.log"), "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - 8192))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        kept = [line for line in text.splitlines() if line.strip()][-lines:]
        return ("\nkernel log (last lines):\n" + "\n".join(kept)) if kept else ""

    text = ""
    with anyio.CancelScope(shield=True):
        text = await anyio.to_thread.run_sync(read)
    return text


async def _destroy_unstarted(km: Any, private_dir: str) -> None:
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_BOUND):
        try:
            if km.has_kernel:
                await km.shutdown_kernel(now=True)
            else:
                await km.cleanup_resources()
        except Exception as exc:  # boundary: best effort, the directory goes anyway
            logger.debug("cleaning up an unstarted kernel failed: %r", exc)
        await anyio.to_thread.run_sync(shutil.rmtree, private_dir, True)


def _signal_name(number: int) -> str:
    import signal

    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
