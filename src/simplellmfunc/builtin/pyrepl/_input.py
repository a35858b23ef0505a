"""Answering ``input()``: pending requests of one REPL, and who can answer them."""

from __future__ import annotations

from collections import OrderedDict
from weakref import WeakValueDictionary

import anyio

from ...tools import ToolEventEmitter

__all__ = ["InputBroker", "delivers_live", "submit_kernel_input"]


def delivers_live(emitter: ToolEventEmitter | None) -> bool:
    """Whether someone receives ``emitter``'s events while the tool runs (and can answer).

    Inside a run, the engine's emitters are live when the run's events are read; a
    ``ToolEventEmitter()`` made by hand is live unless built with ``live=False`` (its holder
    polls ``get_events()`` and answers with ``PyRepl.submit_input``).
    """
    return emitter is not None and emitter.live


# Every pending request of the process, by id (ids are random): a front end that shows the
# events of an agent whose PyRepl it does not hold answers through submit_kernel_input.
_OPEN: WeakValueDictionary[str, InputBroker] = WeakValueDictionary()


def submit_kernel_input(request_id: str, value: str) -> bool:
    """Answer the ``kernel_input_request`` event ``request_id`` of any PyRepl of this process.

    For a front end that receives an agent's events but does not hold its PyRepl (the REPL is
    in the decorator's toolkit): the event's ``request_id`` is enough.

    Returns:
        Whether a pending request took the value (False: it timed out, was answered, its
        execution ended, or no pending request has this id).
    """
    broker = _OPEN.get(request_id)
    return broker is not None and broker.submit(request_id, str(value))


_REMEMBERED = 256  # closed requests whose fate is remembered, to say why an answer came late


class InputBroker:
    """Pending ``input()`` requests of one REPL, answered by ``PyRepl.submit_input``."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[anyio.Event, list[str]]] = {}
        self._closed: OrderedDict[str, str] = OrderedDict()

    def open(self, request_id: str) -> tuple[anyio.Event, list[str]]:
        """Register a request; the answer lands in the returned list and sets the event."""
        slot: tuple[anyio.Event, list[str]] = (anyio.Event(), [])
        self._pending[request_id] = slot
        _OPEN[request_id] = self
        return slot

    def close(self, request_id: str, why: str = "the execution that asked for it ended") -> None:
        """Forget a request (answered, timed out or abandoned), remembering ``why``."""
        _OPEN.pop(request_id, None)
        if self._pending.pop(request_id, None) is not None:
            self._remember(request_id, why)

    def submit(self, request_id: str, value: str) -> bool:
        """Answer a pending request; False when there is no such request (any more)."""
        slot = self._pending.pop(request_id, None)
        _OPEN.pop(request_id, None)
        if slot is None:
            return False
        slot[1].append(value)
        slot[0].set()
        self._remember(request_id, "it was already answered")
        return True

    def why_not(self, request_id: str) -> str:
        """Why ``request_id`` cannot take an answer now (empty while it is pending)."""
        if request_id in self._pending:
            return ""
        return self._closed.get(request_id, "no input() request has this id")

    def _remember(self, request_id: str, why: str) -> None:
        self._closed[request_id] = why
        while len(self._closed) > _REMEMBERED:
            self._closed.popitem(last=False)
