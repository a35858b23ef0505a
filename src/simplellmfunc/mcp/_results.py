"""MCP results as our values: text and images for the model, structured content for code."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import mcp.types as types

from .._content import ImgUrl, Text

__all__ = ["MCPResult", "prompt_messages", "resource_result", "tool_result"]

_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

Part: TypeAlias = Text | ImgUrl


@dataclass(frozen=True, slots=True)
class MCPResult:
    """What an MCP tool call (or a resource read) returned.

    Attributes:
        content: Text and images in the server's order; resources and links are described in
            text, image resources become images, other binary data is summarised.
        structured: The ``structuredContent`` of a tool result, if any.
        is_error: Whether the server flagged the result as an error.
    """

    content: tuple[Part, ...] = ()
    structured: Any = None
    is_error: bool = False

    @property
    def text(self) -> str:
        """Every text part, joined by newlines (the structured content as JSON if no text)."""
        texts = [p.text for p in self.content if isinstance(p, Text)]
        if not texts and self.structured is not None:
            return json.dumps(self.structured, ensure_ascii=False, default=str)
        return "\n".join(texts)

    @property
    def images(self) -> tuple[ImgUrl, ...]:
        """The images of the result."""
        return tuple(p for p in self.content if isinstance(p, ImgUrl))

    def for_model(self) -> str | tuple[str, list[ImgUrl]]:
        """The result as a tool result: its text, or ``(text, images)`` when it has images."""
        images = self.images
        return (self.text, list(images)) if images else self.text


def tool_result(result: types.CallToolResult) -> MCPResult:
    """Convert a ``tools/call`` result."""
    return MCPResult(tuple(_parts(result.content)), result.structured_content, result.is_error)


def resource_result(result: types.ReadResourceResult) -> MCPResult:
    """Convert a ``resources/read`` result."""
    parts: list[Part] = []
    for contents in result.contents:
        parts.extend(_resource_parts(contents, header=len(result.contents) > 1))
    return MCPResult(tuple(parts))


def prompt_messages(result: types.GetPromptResult) -> list[dict[str, Any]]:
    """Convert a ``prompts/get`` result into chat messages (OpenAI-style dicts)."""
    messages: list[dict[str, Any]] = []
    for message in result.messages:
        parts = list(_parts([message.content]))
        if all(isinstance(p, Text) for p in parts):
            content: Any = "\n".join(p.text for p in parts if isinstance(p, Text))
        else:
            content = [p.to_part() for p in parts]
        messages.append({"role": message.role, "content": content})
    return messages


def _parts(blocks: Iterable[types.ContentBlock]) -> Iterable[Part]:
    for block in blocks:
        match block:
            case types.TextContent():
                yield Text(block.text)
            case types.ImageContent():
                yield _image(block.data, block.mime_type, "image")
            case types.AudioContent():
                yield Text(f"[audio ({block.mime_type}, {_size(block.data)}) not shown]")
            case types.ResourceLink():
                yield Text(_describe_link(block))
            case types.EmbeddedResource():
                yield from _resource_parts(block.resource, header=True)
            case _:
                yield Text(json.dumps(block.model_dump(mode="json", exclude_none=True)))


def _resource_parts(
    contents: types.TextResourceContents | types.BlobResourceContents, *, header: bool
) -> Sequence[Part]:
    if isinstance(contents, types.TextResourceContents):
        return [Text(f"[resource {contents.uri}]\n{contents.text}" if header else contents.text)]
    mime = contents.mime_type or "application/octet-stream"
    if mime in _IMAGE_MIMES:
        image = _image(contents.blob, mime, f"resource {contents.uri}")
        return [Text(f"[resource {contents.uri}]"), image] if header else [image]
    return [Text(f"[resource {contents.uri}: {mime}, {_size(contents.blob)} of binary data]")]


def _image(data: str, mime: str, what: str) -> Part:
    if mime not in _IMAGE_MIMES:
        return Text(f"[{what} ({mime}, {_size(data)}) not shown: unsupported image type]")
    return ImgUrl(f"data:{mime};base64,{data}")


def _describe_link(link: types.ResourceLink) -> str:
    text = f"[resource link] {link.title or link.name}: {link.uri}"
    if link.mime_type:
        text += f" ({link.mime_type})"
    if link.description:
        text += f" - {link.description}"
    return text


def _size(data: str) -> str:
    # The decoded size, without decoding what may be megabytes.
    return f"{len(data.rstrip('=')) * 3 // 4} bytes"
