"""What a session's running turn waits for a person to answer, read from the turn's events.

A turn waits for a person when a tool call asks for approval (``ApprovalRequestEvent``) or a
PyRepl cell calls ``input()`` (the ``kernel_input_request`` event). The store tracks both from
the events it passes on (:func:`track_wait`), so that

* a consumer that leaves while a person is asked (a page reloaded, an A2A task that went
  ``input-required``, an AG-UI run that ended with its interrupt outcome) does not abort the
  turn: the turn is *parked* and a later consumer follows it (``SessionStore.follow``);
* a front that comes back can redraw what waits (``SessionStore.pending``) in the one wire
  form of ``docs/wire.md``.

A request stops waiting when it is resolved (``ApprovalResolvedEvent``), answered through the
session (``Session.answer``), or when the tool call that asked ends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    CustomEvent,
    EventYield,
    ToolCallEndEvent,
    ToolCallErrorEvent,
)
from ._json import WirePolicy, to_wire

__all__ = [
    "INPUT_REQUEST",
    "asked_request_id",
    "pending_request_id",
    "track_wait",
    "wait_kind",
]

INPUT_REQUEST = "kernel_input_request"
_POLICY = WirePolicy(max_text_chars=20_000)


def track_wait(waits: dict[str, dict[str, Any]], item: object) -> None:
    """Update ``waits`` (request id → the request's event in its wire form) with ``item``."""
    if not isinstance(item, EventYield):
        return
    event = item.event
    if isinstance(event, ApprovalRequestEvent):
        waits[event.tool_call_id] = to_wire(item, _POLICY)
    elif isinstance(event, ApprovalResolvedEvent):
        waits.pop(event.tool_call_id, None)
    elif isinstance(event, CustomEvent) and event.event_name == INPUT_REQUEST:
        request_id = event.data.get("request_id") if isinstance(event.data, dict) else None
        if isinstance(request_id, str):
            waits[request_id] = to_wire(item, _POLICY)
    elif isinstance(event, ToolCallEndEvent | ToolCallErrorEvent):
        ended = [k for k, w in waits.items() if _call_of(w) == event.tool_call_id]
        for key in ended:
            waits.pop(key, None)


def wait_kind(wait: Mapping[str, Any]) -> str:
    """``"approval"`` or ``"input"``: what a tracked request asks for."""
    return "input" if wait.get("event_name") == INPUT_REQUEST else "approval"


def _call_of(wait: Mapping[str, Any]) -> object:
    return wait.get("tool_call_id")


def asked_request_id(item: object) -> str | None:
    """The request id when ``item`` asks a person for something (an approval, an ``input()``)."""
    if not isinstance(item, EventYield):
        return None
    event = item.event
    if isinstance(event, ApprovalRequestEvent):
        return event.tool_call_id
    if isinstance(event, CustomEvent) and event.event_name == INPUT_REQUEST:
        request_id = event.data.get("request_id") if isinstance(event.data, dict) else None
        return request_id if isinstance(request_id, str) else None
    return None


def pending_request_id(wait: Mapping[str, Any]) -> str:
    """The id a tracked request is answered by."""
    if wait_kind(wait) == "input":
        return str((wait.get("data") or {}).get("request_id", ""))
    return str(wait.get("tool_call_id", ""))
