"""AbortSignal and PauseSignal: ask a running call to stop now, or at its next safe point."""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["AbortSignal", "PauseSignal"]


class AbortSignal:
    """A one-shot signal that aborts a run.

    Create it anywhere (no event loop needed), pass it as ``_abort_signal=`` and call
    :meth:`abort` from another task. Aborting interrupts in-flight LLM calls and running tools;
    the run ends with a valid history and a ``ReactEndEvent`` saying why.
    """

    __slots__ = ("_callbacks", "_events", "_reason", "_set")

    def __init__(self) -> None:
        self._set = False
        self._reason = ""
        self._events: list[anyio.Event] = []
        self._callbacks: list[Callable[[str], None]] = []

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` was called."""
        return self._set

    @property
    def reason(self) -> str:
        """The reason given to :meth:`abort` (empty until then)."""
        return self._reason

    def abort(self, reason: str = "aborted by user") -> None:
        """Abort the run (idempotent: the first reason is kept)."""
        if self._set:
            return
        self._set = True
        self._reason = reason
        events, self._events = self._events, []
        for event in events:
            event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(reason)

    def add_callback(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(reason)`` on abort (at once if already aborted); returns a remover.

        The engine uses this to cancel the cancel scope of whatever is running, without a
        watcher task per phase.
        """
        if self._set:
            callback(self._reason)
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    async def wait(self) -> str:
        """Wait until the signal is aborted and return the reason."""
        if not self._set:
            event = anyio.Event()
            self._events.append(event)
            await event.wait()
        return self._reason

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self._set else "pending"
        return f"AbortSignal({state})"


class PauseSignal:
    """Ask a run to stop at its next safe point, so it can be resumed later (seed 001's pause).

    Unlike an abort, nothing is interrupted: the run finishes the LLM call or tool batch in
    progress and stops before its next LLM call, where every tool call has its result. The run
    ends with ``terminated_by="paused"`` and a history that ``agent.resume(history)`` continues.
    """

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    @property
    def paused(self) -> bool:
        """Whether :meth:`pause` was called."""
        return self._set

    def pause(self) -> None:
        """Stop the run at its next safe point (idempotent)."""
        self._set = True

    def __repr__(self) -> str:
        return f"PauseSignal({'paused' if self._set else 'running'})"
