"""What a 200 reply must carry, and a whole reply told as stream events.

Both HTTP calls hold a reply to the same rule, streamed or not: an empty reply (no text, no tool
calls, no reasoning) is an :class:`~simplellmfunc.exceptions.EmptyReplyError`, never a silent
empty answer. A server that ignores ``"stream": true`` and sends the whole JSON reply is told to
the stream's consumer as the events a stream of that reply would have carried.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import httpx

from ..exceptions import EmptyReplyError, ProviderError
from ._base import LLMResponse, StreamEvent, TextDelta, ToolCallDelta

__all__ = ["check_reply", "is_json", "malformed_reply", "reply_events"]

# Finish reasons that say why a reply is empty: a retry would get the same.
_WHY_EMPTY: Final = {
    "length": "the reply budget (max_tokens) was spent before any of it",
    "content_filter": "the server's content filter withheld it",
}


def check_reply(response: LLMResponse) -> LLMResponse:
    """``response``, unless it is empty: no text, no tool calls, no reasoning.

    Raises:
        EmptyReplyError: For an empty reply; retryable unless its finish reason says why it is
            empty.
    """
    message = response.message
    if message.content or message.tool_calls or message.reasoning_details:
        return response
    finish = response.finish_reason
    why = _WHY_EMPTY.get(finish or "")
    raise EmptyReplyError(
        f"{response.provider}: empty reply (no text, no tool calls, no reasoning; "
        f"finish_reason={finish!r})" + (f": {why}" if why else ""),
        status=200,
        request_id=response.request_id,
        retryable=why is None,
        provider=response.provider,
    )


def is_json(response: httpx.Response) -> bool:
    """Whether a response to a stream request is a JSON document instead of an event stream."""
    mime = str(response.headers.get("content-type", "")).partition(";")[0].strip().lower()
    return mime == "application/json" or mime.endswith("+json")


def reply_events(response: LLMResponse) -> list[StreamEvent]:
    """The deltas of a whole reply: its text in one piece, then each tool call whole.

    Reasoning is left to the final reply: its shape is each API's own.
    """
    events: list[StreamEvent] = []
    if response.text:
        events.append(TextDelta(response.text))
    for index, call in enumerate(response.message.tool_calls):
        events.append(ToolCallDelta(index, call.id, call.name, call.arguments))
    return events


def malformed_reply(
    provider: str, missing: str, data: Mapping[str, object], request_id: str | None
) -> ProviderError:
    """The error for a 200 body without the part every reply of its API has (``missing``)."""
    return ProviderError(
        f"{provider}: response has no {missing}",
        status=200,
        request_id=request_id,
        body_excerpt=json.dumps(data)[:300],
        provider=provider,
    )
