"""What the chat screen shows of one turn, built from the public events alone.

:class:`TurnView` folds the items of one agent turn (``EventYield`` / ``ResponseYield``) into
blocks: a :class:`ReplyBlock` per LLM call (streamed text) and a :class:`ToolRenderSnapshot` per
tool call (arguments, live output, result, duration, images, a pending ``input()``). It knows no
widgets: the app redraws the block :meth:`TurnView.apply` returns.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..engine import APPROVAL_HELP, typed_decision
from ..events import (
    ApprovalRequestEvent,
    ApprovalResolvedEvent,
    CustomEvent,
    EventYield,
    LLMCallEndEvent,
    LLMCallErrorEvent,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ResponseYield,
    ToolCallArgumentsDeltaEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallStartEvent,
)
from ..runtime.config import TurnResult
from ..types import Usage

__all__ = [
    "APPROVAL_HELP",
    "Block",
    "ReplyBlock",
    "ToolCustomEventHook",
    "ToolEventRenderUpdate",
    "ToolRenderSnapshot",
    "TurnView",
    "format_usage",
    "typed_decision",
]

logger = logging.getLogger(__name__)


@dataclass
class ToolRenderSnapshot:
    """What a tool card shows (SimpleLLMFunc's name; custom event hooks read it).

    Attributes:
        tool_name: The tool.
        tool_call_id: The call's id.
        arguments: The call's arguments (streamed fragments under ``"…"`` until they parse).
        output: Live output (kernel stdout/stderr, progress lines of custom events).
        status: ``running``, ``waiting-input``, ``waiting-approval``, ``stderr``, ``success``,
            ``error``, ``cancelled``.
        state: Free room for custom hooks.
        result: What the model reads (``None`` while running).
        duration_s: How long it ran (``None`` while running).
        images: Images shown (``(mime type, base64 data)``).
        input_request: The pending ``input()``: ``(request_id, prompt)``.
        approval_request: The pending approval: ``(tool_call_id, reason)``.
        forks: The sub-runs this call started (SelfReference forks, an agent used as a tool),
            by their agent call id: each a :class:`TurnView` of its own events, drawn inside
            the card.
    """

    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any]
    output: str = ""
    status: str = "running"
    state: dict[str, Any] = field(default_factory=dict)
    result: str | None = None
    duration_s: float | None = None
    images: list[tuple[str, str]] = field(default_factory=list)
    input_request: tuple[str, str] | None = None
    approval_request: tuple[str, str] | None = None
    forks: dict[str, TurnView] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolEventRenderUpdate:
    """What a custom event hook changes on a tool card (SimpleLLMFunc's name)."""

    append_output: str = ""
    replace_output: str | None = None
    status: str | None = None


ToolCustomEventHook: TypeAlias = Callable[
    [CustomEvent, ToolRenderSnapshot], ToolEventRenderUpdate | None
]


@dataclass
class ReplyBlock:
    """The streamed reply of one LLM call."""

    text: str = ""
    reasoning: str = ""
    done: bool = False


Block: TypeAlias = ReplyBlock | ToolRenderSnapshot


def format_usage(usage: Usage, prices: tuple[float, float] | None = None) -> str:
    """One line: tokens in/out, LLM calls and, with ``prices`` (USD per million input and
    output tokens), the cost."""
    line = (
        f"{usage.prompt_tokens} in · {usage.completion_tokens} out · "
        f"{usage.calls} LLM call{'s' if usage.calls != 1 else ''}"
    )
    if usage.estimated:
        line += " (estimated)"
    if prices is not None:
        cost = (usage.prompt_tokens * prices[0] + usage.completion_tokens * prices[1]) / 1e6
        line += f" · ${cost:.4f}"
    return line


def _text(data: Any) -> str:
    if isinstance(data, dict) and isinstance(data.get("text"), str):
        return str(data["text"])
    return data if isinstance(data, str) else ""


def builtin_hook(event: CustomEvent, card: ToolRenderSnapshot) -> ToolEventRenderUpdate | None:
    """PyRepl's events: kernel stdout/stderr, ``input()`` prompts, images."""
    name, data = event.event_name, event.data
    if name == "kernel_stdout":
        return ToolEventRenderUpdate(append_output=_text(data))
    if name == "kernel_stderr":
        return ToolEventRenderUpdate(append_output=_text(data), status="stderr")
    if name == "kernel_input_request" and isinstance(data, dict):
        card.input_request = (str(data.get("request_id", "")), str(data.get("prompt", "")))
        return ToolEventRenderUpdate(status="waiting-input")
    if name == "kernel_image" and isinstance(data, dict):
        card.images.append((str(data.get("mime_type", "image")), str(data.get("data", ""))))
        return ToolEventRenderUpdate()
    if name in ("runtime_primitive_start", "runtime_primitive_end"):
        return ToolEventRenderUpdate()
    return None


def _fallback(event: CustomEvent) -> ToolEventRenderUpdate:
    try:
        data = json.dumps(event.data, ensure_ascii=False, default=str)
    except ValueError:
        data = repr(event.data)
    return ToolEventRenderUpdate(append_output=f"[{event.event_name}] {data}\n")


_RAISED = re.compile(r"^[A-Za-z_.]*(Error|Exception|Interrupt|Exit)\b")


def error_line(error_type: str, message: str) -> str:
    """One line for a failed tool call: the exception line of a failed PyRepl cell, else the
    message's first line, naming the error type once (``"Error: <type>: ..."`` messages do)."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    line = next((x for x in lines if _RAISED.match(x)), lines[0] if lines else "")
    line = line.removeprefix("Error: ")
    if error_type and error_type != "ToolRetry" and not line.startswith(error_type):
        line = f"{error_type}: {line}"
    return line or "failed"


@dataclass
class TurnView:
    """The blocks of one turn, folded from its items.

    The events of a sub-run started by a tool call (``origin.fork_depth`` > 0 and
    ``origin.parent_tool_call_id`` set: a SelfReference fork, an agent used as a tool) fold
    into a view of their own in that call's card (:attr:`ToolRenderSnapshot.forks`), nested as
    deep as the sub-runs go; :meth:`apply` then returns the outermost card. Sub-run events
    with no such call are left out.

    Args:
        hooks: Custom event hooks, asked before the builtin one (the first update wins).
        label: What a sub-run's view is called in its card (its agent's name, or its fork id).
    """

    hooks: Sequence[ToolCustomEventHook] = ()
    label: str = ""
    blocks: list[Block] = field(default_factory=list)
    cards: dict[str, ToolRenderSnapshot] = field(default_factory=dict)
    usage: Usage | None = None
    duration_s: float | None = None
    aborted: bool = False
    error: str | None = None
    answer: str = ""
    # Every card of the turn, nested ones included (shared with the sub-runs' views), and the
    # outermost card each one is drawn in.
    _all: dict[str, ToolRenderSnapshot] = field(default_factory=dict, repr=False)
    _outer: dict[str, ToolRenderSnapshot] = field(default_factory=dict, repr=False)

    def reply(self) -> ReplyBlock:
        """The reply being streamed (a new one after a tool card)."""
        if self.blocks and isinstance(self.blocks[-1], ReplyBlock) and not self.blocks[-1].done:
            return self.blocks[-1]
        block = ReplyBlock()
        self.blocks.append(block)
        return block

    def apply(self, item: Any) -> Block | None:
        """Fold one item of the agent; return the block that changed (``None``: none did)."""
        if isinstance(item, ResponseYield):
            self.answer = str(item.response)
            return None
        if isinstance(item, TurnResult):  # the door's last item
            self.answer = item.text
            if item.text and not any(isinstance(b, ReplyBlock) and b.text for b in self.blocks):
                block = self.reply()  # nothing was streamed (no events): the answer at once
                block.text = item.text
                return block
            return None
        if isinstance(item, str):  # an agent without events streams text
            block = self.reply()
            block.text += item
            return block
        if not isinstance(item, EventYield):
            return None
        if item.origin.fork_depth:
            return self._sub_run(item)
        return self._event(item.event)

    def _sub_run(self, item: EventYield) -> Block | None:
        """A sub-run's event, folded into the card of the tool call that started it."""
        origin = item.origin
        parent = self._all.get(origin.parent_tool_call_id or "")
        if parent is None:
            return None
        view = parent.forks.get(origin.agent_call_id)
        if view is None:
            label = origin.agent or (f"fork {origin.fork_id}" if origin.fork_id else "sub-run")
            view = TurnView(self.hooks, label, _all=self._all, _outer=self._outer)
            parent.forks[origin.agent_call_id] = view
        outer = self._outer.get(parent.tool_call_id, parent)
        known = set(view.cards)
        changed = view._event(item.event)
        for call_id in set(view.cards) - known:
            self._outer[call_id] = outer
        return outer if changed is not None else None

    def _event(self, event: Any) -> Block | None:
        if isinstance(event, LLMChunkArriveEvent):
            block = self.reply()
            block.text += event.text
            block.reasoning += event.reasoning
            return block
        if isinstance(event, LLMCallEndEvent):
            block = self.reply()
            if not block.text and event.reply_text:
                block.text = event.reply_text
            block.done = True
            return block
        if isinstance(event, LLMCallErrorEvent) and not event.retryable:
            self.error = f"{event.error_type}: {event.message}"
            return None
        if isinstance(event, ToolCallArgumentsDeltaEvent):
            card = self._card(event.tool_call_id, event.tool_name)
            card.arguments["…"] = str(card.arguments.get("…", "")) + event.arguments_delta
            return card
        if isinstance(event, ToolCallStartEvent):
            card = self._card(event.tool_call_id, event.tool_name)
            card.arguments = dict(event.arguments)
            return card
        if isinstance(event, CustomEvent):
            return self._custom(event)
        if isinstance(event, ApprovalRequestEvent | ApprovalResolvedEvent):
            return self._approval(event)
        if isinstance(event, ToolCallErrorEvent):
            card = self._card(event.tool_call_id, event.tool_name)
            card.status = "cancelled" if event.error_type == "Cancelled" else "error"
            card.output += error_line(event.error_type, event.message) + "\n"
            return card
        if isinstance(event, ToolCallEndEvent):
            card = self._card(event.tool_call_id, event.tool_name)
            card.result, card.duration_s = event.result, event.duration_s
            card.input_request = None
            if card.status not in ("error", "cancelled"):
                card.status = "success" if event.success else "error"
            return card
        if isinstance(event, ReactEndEvent):
            self.usage, self.duration_s = event.total_usage, event.duration_s
            self.aborted = event.aborted
            self.error = self.error or event.error
        return None

    def _card(self, call_id: str, name: str) -> ToolRenderSnapshot:
        card = self.cards.get(call_id)
        if card is None:
            if self.blocks and isinstance(self.blocks[-1], ReplyBlock):
                self.blocks[-1].done = True
            card = ToolRenderSnapshot(tool_name=name, tool_call_id=call_id, arguments={})
            self.cards[call_id] = self._all[call_id] = card
            self.blocks.append(card)
        return card

    def _custom(self, event: CustomEvent) -> Block | None:
        card = self.cards.get(event.tool_call_id or "")
        if card is None:
            return None
        update = None
        for hook in (*self.hooks, builtin_hook):
            try:
                update = hook(event, card)
            except Exception:  # boundary: a failing display hook must not end the turn
                logger.warning("custom event hook %r failed", hook, exc_info=True)
                continue
            if update is not None:
                break
        update = update or _fallback(event)
        if update.replace_output is not None:
            card.output = update.replace_output
        card.output += update.append_output
        if update.status:
            card.status = update.status
        return card

    def _approval(self, event: ApprovalRequestEvent | ApprovalResolvedEvent) -> Block:
        card = self._card(event.tool_call_id, event.tool_name)
        if isinstance(event, ApprovalRequestEvent):
            card.arguments = dict(event.arguments)
            card.approval_request = (event.tool_call_id, event.reason)
            card.status = "waiting-approval"
            return card
        card.approval_request = None
        why = f": {event.reason}" if event.reason else ""
        card.output += f"[{event.outcome}{why}]\n"
        if event.arguments is not None:
            card.arguments = dict(event.arguments)
        card.status = "running" if event.outcome in ("approved", "edited") else "error"
        return card

    def pending_input(self) -> ToolRenderSnapshot | None:
        """The card whose ``input()`` or approval waits for an answer, if any."""
        for card in self.cards.values():
            if card.input_request is not None or card.approval_request is not None:
                return card
        return None
