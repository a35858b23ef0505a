"""A session's turn as the page's Server-Sent Events, and a history as the page redraws it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Mapping, Sequence
from typing import Any

from .._messages import dict_content_text
from ..events import CustomEvent, EventYield, ResponseYield
from ._json import WirePolicy, jsonable, to_wire
from ._sse import encode_sse

__all__ = ["page_history", "turn_frames"]

logger = logging.getLogger(__name__)

#: Images are sent whole (their base64 data is one long string).
_WHOLE = WirePolicy(max_text_chars=None)


def _wire(item: Any, policy: WirePolicy) -> dict[str, Any]:
    if isinstance(item, EventYield):
        event = item.event
        if isinstance(event, CustomEvent) and event.event_name == "kernel_image":
            return to_wire(item, _WHOLE)
        return to_wire(item, policy)
    if isinstance(item, ResponseYield):
        return to_wire(item, policy)
    return {"type": "item", "value": jsonable(item, policy.max_text_chars)}


async def turn_frames(items: AsyncIterable[Any], policy: WirePolicy) -> AsyncIterator[str]:
    """The SSE messages of one turn; a failure becomes a last ``{"type": "error"}`` message
    (the page shows it) instead of a broken stream."""
    iterator = aiter(items)
    try:
        async for item in iterator:
            yield encode_sse(_wire(item, policy))
    except Exception as exc:  # boundary: the page must learn that the turn failed
        logger.warning("a web chat turn failed", exc_info=True)
        yield encode_sse({"type": "error", "error": type(exc).__name__, "message": str(exc)})
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:  # the client left: the turn ends like an abort
            await aclose()


def _calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls.append(
            {
                "id": call.get("id", ""),
                "name": function.get("name", ""),
                "arguments": function.get("arguments", ""),
            }
        )
    return calls


def page_history(
    messages: Sequence[Mapping[str, Any]], max_chars: int | None
) -> list[dict[str, Any]]:
    """The conversation as the page redraws it after a reload: user and assistant texts, tool
    calls (``id``, ``name``, ``arguments``) and tool results; system messages left out, and
    so are the user messages that carry a tool's images (they follow the tool results)."""
    out: list[dict[str, Any]] = []
    previous: Any = None
    for message in messages:
        role, after = message.get("role"), previous
        previous = role if role != "user" or after != "tool" else "tool"
        if role == "user" and after == "tool":
            continue  # a tool result's images, not something the user said
        if role == "user":
            out.append({"role": "user", "text": dict_content_text(message.get("content"))})
        elif role == "assistant":
            out.append(
                {
                    "role": "assistant",
                    "text": dict_content_text(message.get("content")),
                    "tool_calls": _calls(message),
                }
            )
        elif role == "tool":
            text = jsonable(dict_content_text(message.get("content")), max_chars)
            out.append({"role": "tool", "tool_call_id": message.get("tool_call_id"), "text": text})
    return out
