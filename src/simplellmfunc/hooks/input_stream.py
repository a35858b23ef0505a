"""SimpleLLMFunc's ``hooks.input_stream`` module: routing what a user types during an
interactive session, either to a pending ``input()`` of a tool (a PyRepl cell's
``kernel_input_request``) or to the agent as a new chat message.

Pending tool requests come first, oldest first, unless the input says ``force_chat``; a request
whose answer is refused (it timed out, its execution ended) is dropped and the next is tried.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

__all__ = ["AgentInputRouter", "InputRouteResult", "ToolInputRequest", "UserInputEvent"]


@dataclass(frozen=True, slots=True)
class UserInputEvent:
    """One line a user typed; ``request_id`` targets one tool request, ``force_chat`` skips
    them all."""

    text: str
    request_id: str | None = None
    force_chat: bool = False


@dataclass(frozen=True, slots=True)
class ToolInputRequest:
    """A pending ``input()`` of a tool call (from a ``kernel_input_request`` event)."""

    request_id: str
    tool_call_id: str
    prompt: str = ""


@dataclass(frozen=True, slots=True)
class InputRouteResult:
    """Where one input went: ``"chat"`` (``chat_text``), ``"tool"`` (``request``,
    ``submitted_text``), ``"noop"`` (blank input) or ``"rejected"`` (``reason``)."""

    route: Literal["chat", "tool", "noop", "rejected"]
    chat_text: str = ""
    submitted_text: str = ""
    request: ToolInputRequest | None = None
    reason: str = ""


class AgentInputRouter:
    """Routes user input between pending tool ``input()`` requests and the chat.

    Args:
        submit_tool_input: Answers one request, ``(request_id, text) -> accepted``, such as
            ``PyRepl.submit_input``.
    """

    def __init__(self, submit_tool_input: Callable[[str, str], bool]) -> None:
        self._submit = submit_tool_input
        self._pending: OrderedDict[str, ToolInputRequest] = OrderedDict()

    def register_tool_request(self, tool_call_id: str, request_id: str, prompt: str = "") -> None:
        """Remember a pending request (on a ``kernel_input_request`` event)."""
        self._pending[request_id] = ToolInputRequest(request_id, tool_call_id, prompt)

    def clear_tool_requests(self, tool_call_id: str) -> None:
        """Forget the requests of a tool call (it ended)."""
        for request_id in [r for r, q in self._pending.items() if q.tool_call_id == tool_call_id]:
            del self._pending[request_id]

    def clear_all_requests(self) -> None:
        """Forget every pending request."""
        self._pending.clear()

    def has_pending_tool_requests(self) -> bool:
        """Whether a tool waits for input."""
        return bool(self._pending)

    def peek_pending_tool_request(self) -> ToolInputRequest | None:
        """The oldest pending request (None: none)."""
        return next(iter(self._pending.values()), None)

    def route_input(self, event: UserInputEvent) -> InputRouteResult:
        """Deliver one input to a pending tool request, or route it to the chat."""
        if self._pending and not event.force_chat:
            return self._to_tool(event)
        text = event.text.strip()
        return InputRouteResult("chat", chat_text=text) if text else InputRouteResult("noop")

    def _to_tool(self, event: UserInputEvent) -> InputRouteResult:
        targets = [event.request_id] if event.request_id else list(self._pending)
        for request_id in targets:
            request = self._pending.pop(request_id, None)
            if request is None:
                continue
            try:
                accepted = self._submit(request.request_id, event.text)
            except Exception:  # boundary: a failing consumer is a refused answer
                accepted = False
            if accepted:
                return InputRouteResult("tool", submitted_text=event.text, request=request)
        return InputRouteResult(
            "rejected", reason="Tool input request expired before it could be submitted."
        )
