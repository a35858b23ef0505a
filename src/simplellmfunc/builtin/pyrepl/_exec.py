"""Run one cell: send the request, collect IOPub, answer input(), and watch the clock.

One :class:`CellRun` per execution. Inside one task group: the IOPub pump (output, results,
images, error details, until the kernel reports idle), the stdin pump (``input()`` requests), an
abort watcher and, when the bridge is on, the bridge server. The calling task is the watchdog: it
waits for idle, and decides on timeout (active time only; waiting for input is not counted and
every answer restarts the window), unanswered input, abort, or the death of the kernel.
"""

from __future__ import annotations

import logging
import queue
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ..._abort import AbortSignal
from ...exceptions import ArgumentValueError
from ...tools import ToolEventEmitter
from ._capture import Spool, StreamCapture
from ._in_kernel._boot import ERROR_MIME, IMAGE_MIME
from ._input import InputBroker
from ._session import KernelSession

__all__ = ["CellLimits", "CellOutcome", "CellRun", "Verdict"]

logger = logging.getLogger("simplellmfunc.pyrepl")

Verdict = Literal["done", "timeout", "input_timeout", "aborted", "died"]
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_LIVENESS_POLL = 0.5
_REPLY_TIMEOUT = 5.0


@dataclass(frozen=True, slots=True)
class CellLimits:
    """The limits of one PyRepl execution: ``PyRepl(limits=CellLimits(...))``.

    Timeouts are in seconds, sizes in characters (tokens for ``max_output_tokens``). The
    flat ``PyRepl`` keywords (``execution_timeout_seconds=``, ``max_capture_chars=``...)
    override the matching field when given.

    Attributes:
        execution_timeout: Active-time limit of one execution (waiting for ``input()`` is not
            counted; each answered input restarts the window).
        input_idle_timeout: How long one ``input()`` waits for an answer.
        interrupt_grace: How long an interrupted execution may take to stop before the kernel
            is restarted (losing its state).
        max_capture_chars: Characters kept in memory per output stream and execution.
        max_file_chars: Characters saved per output stream and execution in its output file.
        max_output_tokens: About how much output the model reads per execution.

    Raises:
        ArgumentValueError: For a non-positive timeout or size (a ``UserError`` and a
            ``ValueError``).
    """

    execution_timeout: float = 120.0
    input_idle_timeout: float = 300.0
    interrupt_grace: float = 5.0
    max_capture_chars: int = 4_000_000
    max_file_chars: int = 100_000_000
    max_output_tokens: int = 20_000

    def __post_init__(self) -> None:
        for name in ("execution_timeout", "input_idle_timeout", "interrupt_grace"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ArgumentValueError(
                    f"CellLimits.{name} must be a positive number of seconds, got {value!r}"
                )
        for name in ("max_capture_chars", "max_file_chars", "max_output_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ArgumentValueError(f"CellLimits.{name} must be a positive int, got {value!r}")


@dataclass(slots=True)
class CellOutcome:
    """Everything one execution produced, before it becomes the result dict."""

    verdict: Verdict = "done"
    stdout: StreamCapture = field(default_factory=lambda: StreamCapture(1 << 20))
    stderr: StreamCapture = field(default_factory=lambda: StreamCapture(1 << 20))
    return_value: str | None = None
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    error_details: dict[str, Any] | None = None
    reply: dict[str, Any] | None = None
    recovered: bool = True
    death: str | None = None
    inputs: int = 0
    ran: bool = True
    kernel_exited: bool = False


class CellRun:
    """One execution of ``code`` in ``session``; call :meth:`run` once."""

    def __init__(
        self,
        session: KernelSession,
        code: str,
        limits: CellLimits,
        *,
        emitter: ToolEventEmitter | None,
        abort: AbortSignal | None,
        inputs: InputBroker,
        allow_input: bool = False,
        serve: Callable[[], Coroutine[Any, Any, None]] | None = None,
        output_paths: Mapping[str, str] | None = None,
    ) -> None:
        self.session = session
        self.code = code
        self.limits = limits
        self.emitter = emitter
        self.abort = abort
        self.inputs = inputs
        self.allow_input = allow_input and emitter is not None
        self.serve = serve
        paths = output_paths or {}

        def capture(name: str) -> StreamCapture:
            path = paths.get(name)
            spool = Spool(path, limits.max_file_chars) if path is not None else None
            return StreamCapture(limits.max_capture_chars, spool)

        self.out = CellOutcome(stdout=capture("stdout"), stderr=capture("stderr"))
        self.msg_id = ""
        self._idle = anyio.Event()
        self._wake = anyio.Event()
        self._waiting_input = False
        self._window_start = 0.0
        self._input_start = 0.0

    async def run(self) -> CellOutcome:
        """Execute and return the outcome (the session is destroyed if it cannot recover)."""
        client = self.session.client
        self.msg_id = client.execute(
            self.code, silent=False, store_history=True, allow_stdin=self.allow_input
        )
        self._window_start = anyio.current_time()
        try:
            if self.allow_input or self.abort is not None or self.serve is not None:
                await self._run_beside_helpers()
            else:
                await self._run_alone()
        except BaseException:  # boundary: cleanup, re-raised: the kernel is recovered
            with anyio.CancelScope(shield=True):
                await self._recover_after_cancel()
                for stream in (self.out.stdout, self.out.stderr):
                    if stream.spool is not None:
                        await stream.spool.discard()
            raise
        if self.out.verdict == "died":
            self.out.death = await self.session.exit_description()
            await self.session.destroy("died")
        elif not self.out.recovered:
            await self.session.destroy("did not stop after an interrupt and was killed")
        else:
            self.out.reply = await self._reply()
            if _asks_exit(self.out.reply):
                # The kernel stops its loop a moment after this reply: end it now, so that
                # this result says so instead of a later execution finding a dead kernel.
                self.out.kernel_exited = True
                await self.session.destroy("exited because the code asked it to")
        return self.out

    async def _run_beside_helpers(self) -> None:
        """The IOPub pump, the stdin pump, the abort watcher and the bridge in one task group;
        this task is the watchdog."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._pump_iopub)
            if self.allow_input:
                tg.start_soon(self._pump_stdin)
            if self.abort is not None:
                tg.start_soon(self._watch_abort, self.abort)
            if self.serve is not None:
                tg.start_soon(self.serve)
            self.out.verdict = await self._watchdog()
            if self.out.verdict in ("timeout", "input_timeout", "aborted"):
                await self._interrupt_and_wait()
            tg.cancel_scope.cancel()

    async def _run_alone(self) -> None:
        """Nothing to serve beside the cell (no input, no abort signal, no bridge): this task
        reads IOPub itself and is its own watchdog, with no task group and no hand-over between
        tasks per message (most of the host's cost of a short cell)."""
        client = self.session.client
        iopub = client.iopub_channel
        while True:
            remaining = self._window_start + self.limits.execution_timeout - anyio.current_time()
            if remaining <= 0:
                break
            try:
                msg = await self.session.next_message(iopub, min(remaining, _LIVENESS_POLL))
            except queue.Empty:
                if not await self.session.is_alive():
                    self.out.verdict = "died"
                    return
                continue
            if await self._on_iopub(msg):
                self._idle.set()
                return
        self.out.verdict = "timeout"
        await self.session.interrupt()
        with anyio.move_on_after(self.limits.interrupt_grace):
            while not await self._on_iopub(await client.get_iopub_msg()):
                pass
            self._idle.set()
        self.out.recovered = self._idle.is_set()

    # -- the watchdog -------------------------------------------------------------------------

    def _notify(self) -> None:
        self._wake.set()

    async def _watchdog(self) -> Verdict:
        while not self._idle.is_set():
            now = anyio.current_time()
            if self._waiting_input:
                deadline = self._input_start + self.limits.input_idle_timeout
            else:
                deadline = self._window_start + self.limits.execution_timeout
            if now >= deadline:
                return "input_timeout" if self._waiting_input else "timeout"
            with anyio.move_on_after(min(deadline - now, _LIVENESS_POLL)):
                await self._wake.wait()
            if self._wake.is_set():
                self._wake = anyio.Event()
            if self._idle.is_set():
                break
            if self.abort is not None and self.abort.aborted:
                return "aborted"
            if not await self.session.is_alive():
                return "died"
        return "done"

    async def _watch_abort(self, abort: AbortSignal) -> None:
        await abort.wait()
        self._notify()

    async def _interrupt_and_wait(self) -> None:
        """Interrupt the cell; the IOPub pump keeps collecting until idle or the grace ends."""
        await self.session.interrupt()
        with anyio.move_on_after(self.limits.interrupt_grace):
            await self._idle.wait()
        self.out.recovered = self._idle.is_set()

    async def _recover_after_cancel(self) -> None:
        """The caller was cancelled mid-cell: interrupt and wait for idle, or kill the kernel."""
        if self._idle.is_set() or self.session.closed:
            return
        await self.session.interrupt()
        with anyio.move_on_after(self.limits.interrupt_grace):
            while True:
                msg = await self.session.client.get_iopub_msg()
                if _is_idle(msg, self.msg_id):
                    return
        await self.session.destroy(
            "was killed: an execution was cancelled and did not stop after an interrupt"
        )

    async def _reply(self) -> dict[str, Any] | None:
        try:
            return await self.session.reply(self.msg_id, _REPLY_TIMEOUT)
        except Exception as exc:  # boundary: a missing reply only loses the execution count
            logger.debug("no execute_reply from the kernel: %r", exc)
            return None

    # -- IOPub --------------------------------------------------------------------------------

    async def _pump_iopub(self) -> None:
        iopub = self.session.client.iopub_channel
        while not await self._on_iopub(await self.session.next_message(iopub, None)):
            pass
        self._idle.set()
        self._notify()

    async def _on_iopub(self, msg: dict[str, Any]) -> bool:
        """Take one IOPub message; whether it says this cell is done (the kernel is idle)."""
        if msg["parent_header"].get("msg_id") != self.msg_id:
            return False
        kind = msg["msg_type"]
        content = msg["content"]
        if kind == "status":
            return bool(content.get("execution_state") == "idle")
        if kind == "stream":
            await self._stream(content.get("name", "stdout"), content.get("text", ""))
        elif kind == "execute_result":
            await self._rich(content.get("data", {}), result=True)
        elif kind in ("display_data", "update_display_data"):
            await self._rich(content.get("data", {}), result=False)
        elif kind == "error":
            self.out.error = content
        return False

    async def _stream(self, name: str, text: str) -> None:
        capture = self.out.stderr if name == "stderr" else self.out.stdout
        if capture.write(text):
            await capture.flush()
        if self.emitter is not None and text:
            event = "kernel_stderr" if name == "stderr" else "kernel_stdout"
            for piece in _lines_of(text):
                await self.emitter.emit(event, {"text": piece})

    async def _rich(self, data: dict[str, Any], *, result: bool) -> None:
        if ERROR_MIME in data:
            details = data[ERROR_MIME]
            self.out.error_details = details if isinstance(details, dict) else None
            return
        source = "result" if result else "display"
        found = False
        if isinstance(data.get(IMAGE_MIME), dict):
            ref = data[IMAGE_MIME]
            self.out.artifacts.append({"type": "image", "source": source, **ref})
            if isinstance(ref.get("url"), str):
                await self._emit_image({"source": source, "url": ref["url"]})
            found = True
        for mime in IMAGE_TYPES:
            if isinstance(data.get(mime), str):
                image = {"type": "image", "source": source, "mime_type": mime, "data": data[mime]}
                self.out.artifacts.append(image)
                b64 = data[mime].replace("\n", "")
                await self._emit_image({"source": source, "mime_type": mime, "data": b64})
                found = True
                break
        text = data.get("text/plain")
        if result:
            self.out.return_value = text if isinstance(text, str) else None
        elif not found and isinstance(text, str):
            # A displayed object without an image reads like printed output.
            await self._stream("stdout", text + "\n")

    async def _emit_image(self, payload: dict[str, Any]) -> None:
        """A ``kernel_image`` event: an image the cell showed, live (a front end draws it)."""
        if self.emitter is not None:
            await self.emitter.emit("kernel_image", payload)

    # -- stdin --------------------------------------------------------------------------------

    def _input_closed_reason(self) -> str:
        return _closed_reason(self.out.verdict, self.limits)

    async def _pump_stdin(self) -> None:
        client = self.session.client
        while True:
            msg = await client.get_stdin_msg()
            if msg["parent_header"].get("msg_id") != self.msg_id:
                continue
            if msg["msg_type"] == "input_request":
                await self._answer(msg["content"])

    async def _answer(self, content: dict[str, Any]) -> None:
        assert self.emitter is not None
        request_id = uuid.uuid4().hex
        prompt = str(content.get("prompt", ""))
        password = bool(content.get("password", False))
        event, answer = self.inputs.open(request_id)
        self.out.inputs += 1
        self._waiting_input = True
        self._input_start = anyio.current_time()
        self._notify()
        try:
            await self.emitter.emit(
                "kernel_input_request",
                {
                    "request_id": request_id,
                    "prompt": prompt,
                    "password": password,
                    "timeout_seconds": self.limits.input_idle_timeout,
                },
            )
            await event.wait()
        finally:
            self.inputs.close(request_id, self._input_closed_reason())
        value = answer[0]
        self.session.client.input(value)
        if self.out.stdout.write(f"{prompt}{'*' * len(value) if password else value}\n"):
            await self.out.stdout.flush()
        self._waiting_input = False
        # Each answer restarts the active-time window.
        self._window_start = anyio.current_time()
        self._notify()


_EVENT_LINES = 64  # past this many lines in one kernel message, the rest goes in one event


def _lines_of(text: str) -> list[str]:
    """One event per line, as a user who printed three lines expects three (the kernel
    batches what a cell writes within its flush interval into one message)."""
    lines = text.splitlines(keepends=True)
    if len(lines) <= _EVENT_LINES:
        return lines
    return [*lines[: _EVENT_LINES - 1], "".join(lines[_EVENT_LINES - 1 :])]


def _closed_reason(verdict: Verdict, limits: CellLimits) -> str:
    if verdict == "input_timeout":
        return f"it timed out: no answer within {limits.input_idle_timeout:g} s"
    if verdict == "aborted":
        return "the execution that asked for it was aborted"
    if verdict == "timeout":
        return "the execution that asked for it timed out"
    return "the execution that asked for it ended"


def _asks_exit(reply: dict[str, Any] | None) -> bool:
    """Whether an execute reply carries IPython's request to stop the kernel."""
    payloads = (reply or {}).get("payload") or []
    return any(
        isinstance(p, dict) and p.get("source") == "ask_exit" and not p.get("keepkernel")
        for p in payloads
    )


def _is_idle(msg: dict[str, Any], msg_id: str) -> bool:
    return bool(
        msg["parent_header"].get("msg_id") == msg_id
        and msg["msg_type"] == "status"
        and msg["content"].get("execution_state") == "idle"
    )
