"""The wire: a strict HTTP/1.1 request parser, and response framing (HTTP, SSE, faults).

Renderers (one per endpoint) say *what* to send: a JSON body or a list of SSE events. This module
says *how*: it builds a plan, a lazy sequence of steps (bytes to write, seconds to wait, or
:data:`CLOSE`) that applies the reply's timing and fault options the same way for every API.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from itertools import count
from typing import Any, Final, Protocol, TypeAlias

from ._script import RecordedRequest, Reply, SurrogateMode

__all__ = [
    "CLOSE",
    "Close",
    "EventStream",
    "JsonBody",
    "Rendered",
    "Renderer",
    "RequestHead",
    "SSEEvent",
    "Step",
    "build_plan",
    "encode_text",
    "json_bytes",
    "json_text",
    "parse_head",
    "simple_response",
]

# Long enough for the reader to see the first half of a split write on its own, even when it
# runs on the same event loop as the server.
_FLUSH_SECONDS: Final = 0.002
_KEEPALIVE: Final = ": keep-alive"
_MALFORMED: Final = '{"id": "malformed", "choices": [{"delta": {"content": "'
_EOLS: Final = {"lf": "\n", "crlf": "\r\n", "cr": "\r"}
_LAST_CHUNK: Final = b"0\r\n\r\n"
_MAX_HEAD: Final = 64 * 1024
_MAX_BODY: Final = 64 * 1024 * 1024


class Close(enum.Enum):
    """The type of :data:`CLOSE`."""

    CLOSE = "close"


CLOSE: Final = Close.CLOSE
"""A plan step: close the connection now (whatever the response framing says)."""

Step: TypeAlias = bytes | float | Close


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One server-sent event: its data (one line per ``\\n``) and optional event name."""

    data: str
    event: str | None = None


@dataclass(frozen=True, slots=True)
class JsonBody:
    """A complete (non-streamed) response body: bytes as they are, or text that the plan
    encodes as the reply's ``surrogates`` option says."""

    status: int
    body: bytes | str
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class EventStream:
    """A streamed (200, ``text/event-stream``) response.

    Attributes:
        head: The events of the reply proper (role, reasoning, text, tool-call deltas).
        tail: The events of a normal end (finish, usage, ``[DONE]``).
        error: The event sent in place of ``tail`` when the reply has ``error_event``.
        drip: The small event repeated forever in drip mode (after ``head[:1]``).
    """

    head: Sequence[SSEEvent]
    tail: Sequence[SSEEvent]
    error: SSEEvent | None = None
    drip: SSEEvent = field(default_factory=lambda: SSEEvent("{}"))


Rendered: TypeAlias = JsonBody | EventStream


class Renderer(Protocol):
    """Turns a reply into one API's wire format (one renderer per endpoint)."""

    def render(self, reply: Reply, request: RecordedRequest, seq: int) -> Rendered:
        """Render ``reply`` as the answer to ``request`` (``seq`` numbers the response)."""
        ...


@dataclass(frozen=True, slots=True)
class RequestHead:
    """The parsed head of one request (header names lower-case)."""

    method: str
    target: str
    headers: dict[str, str]
    content_length: int
    keep_alive: bool
    size: int


def parse_head(buf: bytearray) -> RequestHead | int | None:
    """Parse a request head: ``None`` if incomplete, an HTTP status if invalid."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return 431 if len(buf) > _MAX_HEAD else None
    lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not parts[0].isalpha():
        return 400
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            return 400
        name, value = name.lower(), value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    if "transfer-encoding" in headers:
        return 501
    length = headers.get("content-length", "0")
    if not length.isdigit():
        return 400
    if int(length) > _MAX_BODY:
        return 413
    connection = headers.get("connection", "").lower()
    # HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless told to keep.
    keep_alive = "close" not in connection if parts[2] == "HTTP/1.1" else "keep-alive" in connection
    return RequestHead(parts[0], parts[1], headers, int(length), keep_alive, end + 4)


# One encoder for every response: json.dumps with options builds a new encoder per call.
_ENCODE: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def json_text(value: Any) -> str:
    """Compact JSON as APIs send it, with non-ASCII characters left as they are."""
    return _ENCODE(value)


def json_bytes(value: Any) -> bytes:
    """:func:`json_text` as UTF-8 bytes (lone surrogates as JSON escapes)."""
    return encode_text(_ENCODE(value))


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _escape_unless_byte(match: re.Match[str]) -> str:
    code = ord(match.group())
    return match.group() if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def encode_text(text: str, surrogates: SurrogateMode = "escape") -> bytes:
    """``text`` as UTF-8; lone surrogates (only ever inside JSON strings here) as ``surrogates``
    says: JSON ``\\udcff`` escapes, or (``"bytes"``) U+DC80..U+DCFF as the byte each stands
    for, which is invalid UTF-8 on purpose. See :class:`~._script.Reply`."""
    try:
        return text.encode()
    except UnicodeEncodeError:
        pass
    if surrogates == "bytes":
        return _SURROGATE.sub(_escape_unless_byte, text).encode("utf-8", "surrogateescape")
    return _SURROGATE.sub(_escape, text).encode()


def _head(status: int, headers: Mapping[str, str], extra: Mapping[str, str]) -> bytes:
    merged = {name.lower(): (name, value) for name, value in headers.items()}
    merged.update({name.lower(): (name, value) for name, value in extra.items()})
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}"]
    lines.extend(f"{name}: {value}" for name, value in merged.values())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def simple_response(status: int, body: Any, keep_alive: bool) -> bytes:
    """A whole JSON response, for answers that need no reply (404, 400, ...)."""
    payload = json_bytes(body)
    headers = {
        "content-type": "application/json",
        "content-length": str(len(payload)),
        "connection": "keep-alive" if keep_alive else "close",
    }
    return _head(status, headers, {}) + payload


def _sse_bytes(event: SSEEvent, eol: str, surrogates: SurrogateMode) -> bytes:
    if event.event is None and "\n" not in event.data:
        return encode_text(f"data: {event.data}{eol}{eol}", surrogates)
    lines = [] if event.event is None else [f"event: {event.event}"]
    lines.extend(f"data: {line}" for line in event.data.split("\n"))
    return encode_text(eol.join(lines) + eol + eol, surrogates)


def _split_utf8(data: bytes) -> tuple[bytes, bytes] | None:
    """Cut ``data`` after the lead byte of its first multi-byte character."""
    for i, byte in enumerate(data):
        if byte >= 0xC0:
            return data[: i + 1], data[i + 1 :]
    return None


def build_plan(reply: Reply, rendered: Rendered, keep_alive: bool, seq: int) -> Iterator[Step]:
    """The steps that send ``rendered`` with ``reply``'s timing and faults."""
    if reply.ttft > 0:
        yield float(reply.ttft)
    connection = "keep-alive" if keep_alive else "close"
    base = {"x-request-id": f"req_mock_{seq}", "connection": connection}
    if isinstance(rendered, JsonBody):
        yield from _json_plan(reply, rendered, base)
    else:
        yield from _stream_plan(reply, rendered, base)


def _json_plan(reply: Reply, rendered: JsonBody, base: dict[str, str]) -> Iterator[Step]:
    base["content-type"] = rendered.content_type
    body = rendered.body
    if isinstance(body, str):
        body = encode_text(body, reply.surrogates)
    if reply.malformed:
        body = body[: len(body) // 2]
    if reply.drip is None:
        base["content-length"] = str(len(body))
        head = _head(rendered.status, base, reply.headers)
        if reply.disconnect_after is None:
            yield head + body
        else:
            yield head + body[: reply.disconnect_after]
            yield CLOSE
        return
    # JSON allows leading whitespace, so a server may trickle spaces before the body forever.
    base["transfer-encoding"] = "chunked"
    yield _head(rendered.status, base, reply.headers)
    for _ in count():
        yield _chunk(b" ")
        yield float(reply.drip)


def _stream_events(reply: Reply, stream: EventStream) -> Iterator[SSEEvent | None]:
    """The stream's events in order; ``None`` marks the point where the socket closes."""
    if reply.drip is not None:
        yield from stream.head[:1]
        while True:
            yield stream.drip
    events = list(stream.head)
    if reply.malformed:
        events.insert(max(1, len(events) // 2), SSEEvent(_MALFORMED))
    if reply.disconnect_after is not None:
        yield from events[: reply.disconnect_after]
        if stream.error is not None:
            yield stream.error
        yield None
        return
    yield from events
    if stream.error is not None:
        yield stream.error
    else:
        yield from stream.tail


def _stream_plan(reply: Reply, stream: EventStream, base: dict[str, str]) -> Iterator[Step]:
    base.update(
        {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "transfer-encoding": "chunked",
        }
    )
    yield _head(200, base, reply.headers)
    eol = _EOLS[reply.line_ending]
    gap = float(reply.drip if reply.drip is not None else reply.chunk_delay)
    first = True
    for event in _stream_events(reply, stream):
        if event is None:
            yield CLOSE
            return
        if not first:
            if gap > 0:
                yield gap
            if reply.keepalive:
                yield _chunk((_KEEPALIVE + eol + eol).encode())
            if reply.empty_events:
                yield _chunk(f"data:{eol}{eol}".encode())
        first = False
        data = _sse_bytes(event, eol, reply.surrogates)
        halves = _split_utf8(data) if reply.split_utf8 else None
        if halves is None:
            yield _chunk(data)
        else:
            yield _chunk(halves[0])
            yield max(_FLUSH_SECONDS, reply.chunk_delay)
            yield _chunk(halves[1])
    yield _LAST_CHUNK
