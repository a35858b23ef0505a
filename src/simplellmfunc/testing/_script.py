"""Scripted replies of the mock LLM server: what to answer, and what was asked.

A :class:`Reply` is provider-neutral: it says *what* the model answers (text, tool calls,
reasoning, an HTTP error) and *how* the bytes travel (delays, chunking, faults). A renderer per
endpoint turns it into that API's wire format.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypedDict, Unpack

from .._usage import Usage
from ..exceptions import UserError

__all__ = [
    "DeltaShape",
    "LineEnding",
    "RecordedRequest",
    "Reply",
    "ReplyOptions",
    "Script",
    "ScriptItem",
    "SurrogateMode",
    "ToolCallSpec",
    "key_fingerprint",
    "redact_headers",
]

DeltaShape: TypeAlias = Literal["standard", "repeat_id_name", "all_index_0", "no_index", "no_id"]
LineEnding: TypeAlias = Literal["lf", "crlf", "cr"]
SurrogateMode: TypeAlias = Literal["escape", "bytes"]
UsageLike: TypeAlias = tuple[int, int] | Usage

_SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


@dataclass(frozen=True, slots=True)
class ToolCallSpec:
    """One tool call in a scripted reply.

    Attributes:
        name: The function name.
        arguments: A dict (sent as JSON) or a raw string sent verbatim, so a test can send
            broken or truncated JSON.
        id: The call id; ``None`` lets the server make one up (``call_mock<request>_<index>``).
    """

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    def arguments_json(self) -> str:
        """Return the arguments exactly as they go on the wire."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(dict(self.arguments), ensure_ascii=False)


class ReplyOptions(TypedDict, total=False):
    """Options every message reply accepts (see :class:`Reply` for their meaning)."""

    reasoning: str | None
    usage: UsageLike | None
    finish_reason: str | None
    ttft: float
    chunk_delay: float
    chunks: int
    delta_shape: DeltaShape
    disconnect_after: int | None
    malformed: bool
    error_event: Mapping[str, Any] | None
    error_event_style: Literal["data", "event"]
    keepalive: bool
    empty_events: bool
    line_ending: LineEnding
    split_utf8: bool
    surrogates: SurrogateMode
    ignore_stream: bool
    drip: float | None
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """What the mock server answers to one request. Build it with :meth:`text`,
    :meth:`tool_calls` or :meth:`error`.

    Attributes:
        kind: ``"message"`` (a model reply) or ``"error"`` (an HTTP error status).
        content: Reply text (``None`` for none).
        calls: Tool calls, in order.
        reasoning: Reasoning text, streamed before the content (``delta.reasoning_content``).
        usage: ``(prompt_tokens, completion_tokens)``, a :class:`~simplellmfunc._usage.Usage`
            (its cached and reasoning counts are sent too) or ``None`` to send no usage.
        finish_reason: Defaults to ``"tool_calls"`` when there are calls, else ``"stop"``.
        ttft: Seconds to wait before the response headers.
        chunk_delay: Seconds between stream events.
        chunks: How many pieces the text, the reasoning and each call's arguments are cut into.
        delta_shape: How streamed tool-call deltas look: ``"standard"`` (id and name in the first
            delta of a call only), ``"repeat_id_name"`` (in every delta, as llama.cpp sends),
            ``"all_index_0"`` (every call at index 0, told apart by id), ``"no_index"`` (no
            ``index`` key) or ``"no_id"`` (no ids at all).
        disconnect_after: Close the socket after this many stream events (no ``[DONE]``); for a
            non-streamed reply, after this many bytes of the body.
        malformed: Put an event whose data is invalid JSON in the middle of the stream; a
            non-streamed reply sends only the first half of its JSON body.
        error_event: An error object sent after the 200 in place of the normal end of the stream
            (at the ``disconnect_after`` cut, if set); a non-streaming reply becomes a 200 whose
            body is ``{"error": ...}``.
        error_event_style: ``"data"`` (``data: {"error": ...}``) or ``"event"`` (an
            ``event: error`` line before the data).
        keepalive: Send ``: keep-alive`` comment lines between stream events.
        empty_events: Send an event whose data is empty (a bare ``data:`` line, then a blank
            line) between stream events; the SSE spec dispatches it as an event.
        line_ending: Line ending of the stream: ``"lf"``, ``"crlf"`` or ``"cr"``.
        split_utf8: Cut each event's bytes inside its first multi-byte UTF-8 character and flush
            the two halves as separate writes.
        surrogates: How lone surrogates in the reply's strings (text, reasoning, arguments, a
            raw ``body``) go on the wire. ``"escape"``: as JSON ``\\udcff`` escapes, what
            ``JSON.stringify`` and ``json.dumps`` send for a string cut inside a UTF-16 pair.
            ``"bytes"``: U+DC80..U+DCFF as the single byte each stands for (Python's
            ``surrogateescape``), i.e. invalid UTF-8 such as a string cut inside a multi-byte
            character (``"\\udce4\\udcb8"`` sends the first two bytes of ``"中"``); other lone
            surrogates are still escaped.
        ignore_stream: Answer a streaming request as if it were not one: the complete JSON reply
            (``application/json``), as servers that ignore ``"stream": true`` do.
        drip: Send one small piece every ``drip`` seconds, forever, until the client leaves.
        headers: Extra response headers (they override the server's own).
        status: HTTP status of an error reply.
        error_message: ``error.message`` of an error reply.
        error_type: ``error.type`` of an error reply.
        error_code: ``error.code`` of an error reply.
        body: Raw body of an error reply instead of the standard error object (a mapping is
            sent as JSON, ``str``/``bytes`` verbatim).
    """

    kind: Literal["message", "error"] = "message"
    content: str | None = None
    calls: tuple[ToolCallSpec, ...] = ()
    reasoning: str | None = None
    usage: UsageLike | None = (10, 5)
    finish_reason: str | None = None
    ttft: float = 0.0
    chunk_delay: float = 0.0
    chunks: int = 1
    delta_shape: DeltaShape = "standard"
    disconnect_after: int | None = None
    malformed: bool = False
    error_event: Mapping[str, Any] | None = None
    error_event_style: Literal["data", "event"] = "data"
    keepalive: bool = False
    empty_events: bool = False
    line_ending: LineEnding = "lf"
    split_utf8: bool = False
    surrogates: SurrogateMode = "escape"
    ignore_stream: bool = False
    drip: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    status: int = 200
    error_message: str = ""
    error_type: str | None = None
    error_code: str | None = None
    body: Mapping[str, Any] | str | bytes | None = None

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise UserError(f"Reply.chunks must be >= 1, got {self.chunks}")
        if self.ttft < 0 or self.chunk_delay < 0:
            raise UserError("Reply.ttft and Reply.chunk_delay must be >= 0")
        if self.drip is not None and self.drip <= 0:
            raise UserError(f"Reply.drip must be > 0 seconds, got {self.drip}")
        if self.disconnect_after is not None and self.disconnect_after < 0:
            raise UserError(f"Reply.disconnect_after must be >= 0, got {self.disconnect_after}")
        if not 100 <= self.status <= 599:
            raise UserError(f"Reply.status must be an HTTP status, got {self.status}")

    @classmethod
    def text(cls, content: str, **options: Unpack[ReplyOptions]) -> Reply:
        """A plain text reply, e.g. ``Reply.text("Hello world", chunks=3)``."""
        return cls(content=content, **options)

    @classmethod
    def tool_calls(
        cls, *calls: ToolCallSpec, text: str | None = None, **options: Unpack[ReplyOptions]
    ) -> Reply:
        """A reply that calls tools, optionally with some text before the calls.

        Raises:
            UserError: When no call is given.
        """
        if not calls:
            raise UserError("Reply.tool_calls needs at least one ToolCallSpec")
        return cls(content=text, calls=calls, **options)

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "mock error",
        *,
        type: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
        body: Mapping[str, Any] | str | bytes | None = None,
        ttft: float = 0.0,
    ) -> Reply:
        """An HTTP error: ``Reply.error(429, headers={"retry-after": "1"})``.

        The body is ``{"error": {"message", "type", "code", "param"}}`` unless ``body`` is given;
        ``type`` defaults to a name that fits the status.
        """
        default_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
        return cls(
            kind="error",
            status=status,
            error_message=message,
            error_type=type or default_type,
            error_code=code,
            headers=dict(headers or {}),
            body=body,
            ttft=ttft,
            usage=None,
        )

    @property
    def effective_finish_reason(self) -> str:
        """The finish reason sent: the given one, else ``tool_calls`` or ``stop``."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.calls else "stop"

    def usage_counts(self) -> tuple[int, int, int, int] | None:
        """``(prompt, completion, cached, reasoning)`` token counts, or ``None``."""
        usage = self.usage
        if usage is None:
            return None
        if isinstance(usage, Usage):
            return (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.cached_tokens,
                usage.reasoning_tokens,
            )
        return (int(usage[0]), int(usage[1]), 0, 0)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the mock server received.

    Attributes:
        method: HTTP method, e.g. ``"POST"``.
        path: The request target as sent (path and query).
        headers: Lower-case names; credential values replaced by :func:`key_fingerprint`.
        json: The parsed JSON body, or ``None`` when the body is empty or not JSON.
        body_bytes_len: Length of the raw body in bytes.
    """

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    body_bytes_len: int


ScriptItem: TypeAlias = Reply | Callable[[RecordedRequest], Reply]


def key_fingerprint(secret: str) -> str:
    """A short, stable stand-in for a secret: ``sk-...ab12`` (short keys: ``...#<hash>``)."""
    if len(secret) >= 12:
        return f"{secret[:3]}...{secret[-4:]}"
    return "...#" + hashlib.sha256(secret.encode()).hexdigest()[:6]


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Return ``headers`` with credential values replaced by fingerprints (scheme kept)."""
    redacted = dict(headers)
    for name in _SECRET_HEADERS.intersection(redacted):
        scheme, sep, token = redacted[name].partition(" ")
        if sep and token:
            redacted[name] = f"{scheme} {key_fingerprint(token.strip())}"
        else:
            redacted[name] = key_fingerprint(scheme)
    return redacted


class Script:
    """A queue of scripted replies, consumed one per request, with an optional default."""

    def __init__(self, default: ScriptItem | None = None) -> None:
        self.default = default
        self._queue: deque[ScriptItem] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, items: tuple[ScriptItem, ...]) -> None:
        """Queue ``items`` after those already queued."""
        for item in items:
            if not isinstance(item, Reply) and not callable(item):
                raise UserError(f"a scripted reply must be a Reply or a callable, got {item!r}")
        self._queue.extend(items)

    def clear(self) -> None:
        """Drop every queued reply (the default stays)."""
        self._queue.clear()

    def next_reply(self, request: RecordedRequest) -> Reply | None:
        """Pop the next reply (calling it if it is a callable); ``None`` when nothing is left.

        Raises:
            UserError: When a callable returns something other than a :class:`Reply`.
        """
        item = self._queue.popleft() if self._queue else self.default
        if item is None or isinstance(item, Reply):
            return item
        reply = item(request)
        if not isinstance(reply, Reply):
            raise UserError(f"a scripted callable must return a Reply, got {reply!r}")
        return reply
