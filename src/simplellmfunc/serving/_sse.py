"""Server-Sent Events: one event per wire dict, and a whole stream of a decorated call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from .._events import EventYield, ResponseYield
from ._json import WirePolicy, jsonable, to_wire

__all__ = ["close_source", "encode_sse", "sse_stream"]


def encode_sse(data: Any, *, event: str | None = None, id: str | None = None) -> str:
    """One SSE message: ``data`` as compact JSON (a string is sent as it is), with an optional
    ``event:`` name and ``id:``; multi-line data is split over ``data:`` lines."""
    text = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    lines = []
    if event:
        lines.append(f"event: {event}")
    if id is not None:
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return "\n".join(lines) + "\n\n"


async def sse_stream(
    items: AsyncIterable[Any], policy: WirePolicy | None = None, *, named: bool = False
) -> AsyncIterator[str]:
    """The SSE messages of a call with ``enable_event=True`` (or a session's turn).

    Each ``EventYield`` / ``ResponseYield`` becomes ``data: <to_wire JSON>``; other items (text
    tuples) are sent as ``{"type": "item", "value": ...}``. ``named=True`` also sets
    ``event: <kind>`` (for ``EventSource.addEventListener``).
    """
    iterator = aiter(items)
    try:
        async for item in iterator:
            if isinstance(item, EventYield | ResponseYield):
                data = to_wire(item, policy)
            else:
                data = {"type": "item", "value": jsonable(item)}
            yield encode_sse(data, event=data.get("kind") if named else None)
    finally:
        await close_source(iterator)


async def close_source(iterator: Any) -> None:
    """Close ``iterator`` now when it can be closed (a client left: the run ends here)."""
    aclose = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()
