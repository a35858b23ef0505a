"""The chat screen's widgets: a Markdown reply, a collapsible tool card, the prompt."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Collapsible, Markdown, Static, TextArea

from ._view import APPROVAL_HELP, ReplyBlock, ToolRenderSnapshot, TurnView

__all__ = [
    "ImageRenderer",
    "PromptArea",
    "ReplyView",
    "ToolCard",
    "image_placeholder",
    "load_images",
]

ImageRenderer = Callable[[str, str], RenderableType]
"""Draws an image (mime type, base64 data) in a card."""

_IMAGE_CELLS = 60  # widest image, in terminal cells

_STATUS_MARK = {
    "running": "⋯",
    "waiting-input": "⌨",
    "waiting-approval": "⚠",
    "stderr": "⋯",
    "success": "✓",
    "error": "✗",
    "cancelled": "⊘",
}
_OUTPUT_TAIL = 4000  # characters of live output a card keeps on screen


def image_placeholder(mime_type: str, data: str) -> str:
    """The line shown for an image where the terminal shows none (type and size)."""
    size = len(base64.b64decode(data, validate=False)) if data else 0
    return f"[image {mime_type}, {size} bytes]"


def load_images() -> ImageRenderer | None:
    """Images drawn as half-block cells (two pixels a cell, colours kept: every colour terminal
    shows them) with ``textual-image`` (the ``tui-images`` extra); ``None`` without it.

    Call it before the app starts: on import the package asks the terminal what it supports,
    which it cannot do once Textual owns the terminal.
    """
    try:
        from PIL import Image as Picture
        from textual_image.renderable.halfcell import Image as HalfCell
    except ImportError:
        return None

    def draw(mime_type: str, data: str) -> RenderableType:
        raw = base64.b64decode(data, validate=False)
        try:
            with Picture.open(io.BytesIO(raw)) as picture:
                width = min(_IMAGE_CELLS, max(8, picture.width // 4))
        except (OSError, ValueError):  # not an image Pillow reads: say what it was
            return Text(image_placeholder(mime_type, data), style="magenta")
        caption = Text(image_placeholder(mime_type, data), style="magenta")
        return Group(HalfCell(io.BytesIO(raw), width=width), caption)

    return draw


def _arguments(arguments: dict[str, Any]) -> str:
    lines = []
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{key}: {text}" if "\n" not in text else f"{key}:\n{text}")
    return "\n".join(lines)


def _sub_run(view: TurnView, depth: int) -> list[Text]:
    """A sub-run drawn inside its card: its replies and its own tool calls, indented (its
    tool calls' sub-runs one step further)."""
    pad = "  " * depth
    lines = [Text(f"{pad[:-2]}⑂ {view.label}", style="bold blue")]
    for block in view.blocks:
        if isinstance(block, ReplyBlock):
            if block.text.strip():
                lines.append(Text(_indent(block.text.strip()[-_OUTPUT_TAIL:], pad)))
            continue
        mark = _STATUS_MARK.get(block.status, "⋯")
        lines.append(Text(f"{pad}{mark} {block.tool_name} ({block.status})", style="cyan"))
        if block.output:
            lines.append(Text(_indent(block.output[-_OUTPUT_TAIL:].rstrip("\n"), pad + "  ")))
        for inner in block.forks.values():
            lines.extend(_sub_run(inner, depth + 2))
        if block.result is not None:
            lines.append(Text(_indent("→ " + block.result[-_OUTPUT_TAIL:], pad + "  "), "green"))
    return lines


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + line for line in text.splitlines())


class ReplyView(Markdown):
    """A streamed Markdown reply."""

    def __init__(self, block: ReplyBlock) -> None:
        super().__init__(block.text, classes="reply")
        self.shown = block.text

    async def show(self, block: ReplyBlock) -> None:
        """Show the block's text (appended when it only grew)."""
        if block.text.startswith(self.shown):
            delta = block.text[len(self.shown) :]
            if delta:
                await self.append(delta)
        else:
            await self.update(block.text)
        self.shown = block.text


class ToolCard(Collapsible):
    """One tool call: arguments, live output, images, result and duration."""

    def __init__(self, card: ToolRenderSnapshot, images: ImageRenderer | None = None) -> None:
        self.body = Static(classes="tool-body")
        super().__init__(self.body, title=self._heading(card), collapsed=False, classes="tool")
        self.call_id = card.tool_call_id
        self.images = images

    @staticmethod
    def _heading(card: ToolRenderSnapshot) -> str:
        mark = _STATUS_MARK.get(card.status, "⋯")
        took = f" · {card.duration_s:.2f} s" if card.duration_s is not None else ""
        return f"{mark} {card.tool_name} ({card.status}){took}"

    def render_card(self, card: ToolRenderSnapshot) -> RenderableType:
        """The card's body."""
        parts: list[RenderableType] = []
        if card.arguments:
            parts.append(Text(_arguments(card.arguments), style="cyan"))
        if card.output:
            parts.append(Text(card.output[-_OUTPUT_TAIL:].rstrip("\n")))
        for image in card.images:
            if self.images is not None:
                parts.append(self.images(*image))
            else:
                parts.append(Text(image_placeholder(*image), style="magenta"))
        if card.input_request is not None:
            prompt = card.input_request[1] or "input()"
            parts.append(Text(f"⌨ {prompt}  (type the answer below)", style="bold yellow"))
        if card.approval_request is not None:
            reason = card.approval_request[1] or "this call needs approval"
            parts.append(Text(f"⚠ {reason}  ({APPROVAL_HELP})", style="bold yellow"))
        for view in card.forks.values():
            parts.extend(_sub_run(view, 1))
        if card.result is not None:
            style = "green" if card.status == "success" else "red"
            parts.append(Text("→ " + card.result[-_OUTPUT_TAIL:], style=style))
        return Group(*parts)

    def show(self, card: ToolCard | ToolRenderSnapshot) -> None:
        """Redraw from the card's state; a finished card collapses."""
        assert isinstance(card, ToolRenderSnapshot)
        self.title = self._heading(card)
        self.body.update(self.render_card(card))
        if card.result is not None and card.status == "success":
            self.collapsed = True


class PromptArea(TextArea):
    """Multi-line input: Enter sends, Ctrl+J or a trailing backslash starts a new line."""

    class Submitted(Message):
        """The text to send."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            if self.text.endswith("\\"):
                self.text = self.text[:-1]
                self.move_cursor(self.document.end)
                self.insert("\n")
                return
            text = self.text
            self.clear()
            self.post_message(self.Submitted(text))
        elif event.key == "ctrl+j":
            event.stop()
            event.prevent_default()
            self.insert("\n")
        else:
            await super()._on_key(event)
