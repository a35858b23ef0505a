"""Incremental Server-Sent Events decoding, following the WHATWG event-stream algorithm.

See https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation.
The decoder takes raw bytes exactly as the network delivers them (any split, even inside a
multi-byte UTF-8 character or between the CR and LF of a line break) and returns whole events.

Speed matters here (every streamed token passes through): bytes are decoded by an incremental
UTF-8 decoder and split into lines with one regular expression over the decoded text; Python code
runs once per line, never once per byte. :meth:`SSEDecoder.feed_data` is a faster path still for
the shape most servers send, a network chunk of whole ``data:``-only events.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent", "aiter_sse"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One dispatched event.

    Attributes:
        event: The event type (``"message"`` when the block had no ``event`` field).
        data: The data lines of the block joined with ``"\\n"``.
        id: The stream's last event id when the event was dispatched (it carries over from
            earlier events, as the spec says), or ``None`` if no ``id`` was ever set.
        retry: The ``retry`` value given in this event's block, or ``None``.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SSEDecoder:
    """Turn a byte stream into :class:`ServerSentEvent` objects, chunk by chunk.

    Example:
        >>> decoder = SSEDecoder()
        >>> decoder.feed(b"data: hel")
        []
        >>> decoder.feed(b"lo\\n\\n")
        [ServerSentEvent(event='message', data='hello', id=None, retry=None)]

    Behaviour per the WHATWG algorithm: CRLF, LF and CR all end a line; a UTF-8 BOM at the start
    of the stream is dropped; lines starting with ``:`` are comments; a field without a colon has
    an empty value; one space after the colon is stripped; ``data`` lines are joined with
    ``"\\n"``; a block without any ``data`` line is not dispatched; an ``id`` containing NUL is
    ignored; ``retry`` is used only when it is all ASCII digits; unknown fields are ignored.
    Invalid UTF-8 becomes U+FFFD.
    """

    __slots__ = (
        "_clean",
        "_data",
        "_decoder",
        "_event",
        "_last_id",
        "_pending",
        "_reconnection_time",
        "_retry",
        "_skip_lf",
        "_started",
    )

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []  # text after the last line break, not yet a whole line
        self._skip_lf = False  # the last text ended with CR: a leading LF belongs to it
        self._started = False  # the BOM check is done
        self._event = ""
        self._data: list[str] = []
        self._retry: int | None = None
        self._last_id: str | None = None
        self._reconnection_time: int | None = None
        # Between events, nothing pending (no partial line or character, no open block, no
        # lone CR): what feed_data needs to take a chunk on its own. A stream's first chunk
        # qualifies too: one starting with "data:" has no BOM.
        self._clean = True

    @property
    def last_event_id(self) -> str | None:
        """The last event id set by the stream (``None`` until an ``id`` field arrives)."""
        return self._last_id

    @property
    def reconnection_time(self) -> int | None:
        """The last valid ``retry`` value of the stream, in milliseconds."""
        return self._reconnection_time

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completes (often none)."""
        events = self._feed_text(self._decoder.decode(chunk))
        self._clean = (
            not self._pending
            and not self._data
            and not self._skip_lf
            and not self._event
            and self._retry is None
            and not self._decoder.getstate()[0]
        )
        return events

    def feed_data(self, chunk: bytes) -> list[str] | None:
        """The fast path of :meth:`feed` for a chunk of whole ``data:``-only events.

        Most servers write each event in one piece, ``data: {...}\\n\\n``, and the network
        delivers it whole. When the decoder is between events and ``chunk`` is one or more
        such events (one ``data`` line each, LF line ends, no other field, no comment), this
        returns their data without building :class:`ServerSentEvent` objects; the events
        are of type ``"message"``, and ``last_event_id`` does not change. Otherwise it returns
        ``None`` and changes nothing: call :meth:`feed` with the same chunk.

        Example:
            >>> decoder = SSEDecoder()
            >>> decoder.feed_data(b"data: a\\n\\ndata:b\\n\\n")
            ['a', 'b']
            >>> decoder.feed_data(b"event: x\\ndata: c\\n\\n") is None  # use feed
            True
        """
        if not self._clean or chunk[-2:] != b"\n\n" or chunk[:5] != b"data:" or b"\r" in chunk:
            return None
        data: list[str] = []
        for block in chunk.decode("utf-8", "replace")[:-2].split("\n\n"):
            if "\n" in block or block[:5] != "data:":
                return None  # several lines, another field, a comment or an empty block
            data.append(block[6:] if block[5:6] == " " else block[5:])
        self._started = True  # the chunk started with "data:": no BOM to look for any more
        return data

    def flush(self) -> list[ServerSentEvent]:
        """End the stream and reset the decoder for the next stream.

        ``last_event_id`` and ``reconnection_time`` are kept: they are what a reconnect needs.

        Returns:
            Always an empty list: the spec discards a line or an event that the stream did not
            finish (no final line break or blank line), and so does this decoder. The method
            returns a list so callers treat ``feed`` and ``flush`` alike.
        """
        self._decoder.decode(b"", final=True)
        self._decoder.reset()
        self._pending.clear()
        self._skip_lf = False
        self._started = False
        self._clean = True
        self._reset_block()
        return []

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if not self._started:
            self._started = True
            if text[0] == _BOM:
                text = text[1:]
        if "\n" not in text and "\r" not in text:
            # No line ends here: keep the piece without rebuilding the buffer (no quadratic
            # cost when one long line arrives in many small chunks).
            if text:
                self._pending.append(text)
            return []
        if self._pending:
            self._pending.append(text)
            text = "".join(self._pending)
            self._pending.clear()
        # str.split is about twice as fast as the regex; CR-only or CRLF streams need the regex.
        lines = text.split("\n") if "\r" not in text else _LINE_BREAK.split(text)
        rest = lines.pop()
        if rest:
            self._pending.append(rest)
        elif text[-1] == "\r":
            self._skip_lf = True
        events: list[ServerSentEvent] = []
        for line in lines:
            if line[:6] == "data: ":  # the common line, handled inline: this loop is hot
                self._data.append(line[6:])
            elif line:
                self._process_line(line)
            elif self._data:
                events.append(self._dispatch())
            else:
                self._reset_block()
        return events

    def _process_line(self, line: str) -> None:
        name, colon, value = line.partition(":")
        if not colon:
            value = ""
        elif value[:1] == " ":
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = self._reconnection_time = int(value)
        # Comments (empty name: the line started with ":") and unknown fields are ignored.

    def _dispatch(self) -> ServerSentEvent:
        event = ServerSentEvent(
            self._event or "message", "\n".join(self._data), self._last_id, self._retry
        )
        self._reset_block()
        return event

    def _reset_block(self) -> None:
        self._event = ""
        self._data = []
        self._retry = None


async def aiter_sse(byte_chunks: AsyncIterable[bytes]) -> AsyncIterator[ServerSentEvent]:
    """Yield the events of an async byte stream (e.g. ``httpx.Response.aiter_bytes()``).

    An event left unfinished when the stream ends is discarded, as the spec says.
    """
    decoder = SSEDecoder()
    async for chunk in byte_chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.flush():
        yield event
