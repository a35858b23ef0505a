"""The SSE decoder: WHATWG event-stream interpretation, in any chunking."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simplellmfunc.providers._sse import ServerSentEvent, SSEDecoder, aiter_sse


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    events.extend(decoder.flush())
    return events


def decode_bytewise(stream: bytes) -> list[ServerSentEvent]:
    return decode(*(stream[i : i + 1] for i in range(len(stream))))


# --- example tests: one per oddity -------------------------------------------------------------


def test_simple_event() -> None:
    assert decode(b"data: hello\n\n") == [ServerSentEvent(data="hello")]


def test_feed_returns_events_as_soon_as_the_blank_line_arrives() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a") == []
    assert decoder.feed(b"b\n") == []
    assert decoder.feed(b"\n") == [ServerSentEvent(data="ab")]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = b"event: e" + eol + b"data: x" + eol + b"data: y" + eol + eol
    assert decode(stream) == [ServerSentEvent("e", "x\ny")]
    assert decode_bytewise(stream) == [ServerSentEvent("e", "x\ny")]


def test_mixed_line_endings() -> None:
    stream = b"data: a\rdata: b\r\ndata: c\n\r\ndata: d\r\r"
    assert decode(stream) == [ServerSentEvent(data="a\nb\nc"), ServerSentEvent(data="d")]


def test_cr_at_chunk_end_and_lf_at_next_chunk_start_is_one_line_break() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # If the LF counted as a second line break, this would dispatch an event now.
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"data: b\r") == []
    assert decoder.feed(b"\n\r") == [ServerSentEvent(data="a\nb")]


def test_cr_then_empty_chunk_then_lf() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"data: \xe2") == []  # the first byte of a 3-byte character
    assert decoder.feed(b"\x82\xac\r") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [ServerSentEvent(data="a\n€")]


def test_comments_are_ignored() -> None:
    stream = b": keep-alive\n:\ndata: x\n: in between\ndata: y\n\n: trailing\n\n"
    assert decode(stream) == [ServerSentEvent(data="x\ny")]


def test_comment_only_blocks_dispatch_nothing() -> None:
    assert decode(b": ping\n\n: ping\n\n") == []


def test_field_without_colon_has_empty_value() -> None:
    assert decode(b"data\n\n") == [ServerSentEvent(data="")]
    assert decode(b"data\ndata\n\n") == [ServerSentEvent(data="\n")]
    assert decode(b"event\ndata: x\n\n") == [ServerSentEvent("message", "x")]


def test_only_one_leading_space_is_stripped() -> None:
    assert decode(b"data:  two\n\n") == [ServerSentEvent(data=" two")]
    assert decode(b"data:none\n\n") == [ServerSentEvent(data="none")]
    assert decode(b"data:\tx\n\n") == [ServerSentEvent(data="\tx")]
    assert decode(b"data: a: b\n\n") == [ServerSentEvent(data="a: b")]


def test_trailing_whitespace_is_kept() -> None:
    assert decode(b"data: x  \n\n") == [ServerSentEvent(data="x  ")]


def test_multiline_data_is_joined_with_lf() -> None:
    assert decode(b"data: {\ndata: \ndata: }\n\n") == [ServerSentEvent(data="{\n\n}")]


def test_empty_data_line_dispatches_an_empty_event() -> None:
    assert decode(b"data:\n\n") == [ServerSentEvent(data="")]


def test_block_without_data_is_not_dispatched() -> None:
    stream = b"event: ping\n\nid: 7\n\nretry: 10\n\ndata: x\n\n"
    assert decode(stream) == [ServerSentEvent("message", "x", "7", None)]


def test_event_type_does_not_leak_into_next_event() -> None:
    assert decode(b"event: a\ndata: 1\n\ndata: 2\n\n") == [
        ServerSentEvent("a", "1"),
        ServerSentEvent("message", "2"),
    ]


def test_event_type_is_reset_by_a_block_without_data() -> None:
    assert decode(b"event: a\n\ndata: 2\n\n") == [ServerSentEvent("message", "2")]


def test_empty_event_field_means_message() -> None:
    assert decode(b"event:\ndata: x\n\n") == [ServerSentEvent("message", "x")]


def test_last_field_wins() -> None:
    assert decode(b"event: a\nevent: b\ndata: x\n\n") == [ServerSentEvent("b", "x")]


def test_bom_at_stream_start_is_stripped() -> None:
    assert decode(b"\xef\xbb\xbfdata: x\n\n") == [ServerSentEvent(data="x")]
    assert decode(b"\xef", b"\xbb", b"\xbfdata: x\n\n") == [ServerSentEvent(data="x")]


def test_bom_is_stripped_only_once() -> None:
    # A second BOM makes the first line's field name "\ufeffdata": an unknown field.
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n") == [ServerSentEvent(data="y")]


def test_bom_later_in_the_stream_is_data() -> None:
    assert decode(b"data: \xef\xbb\xbfx\n\n") == [ServerSentEvent(data="\ufeffx")]


def test_multibyte_utf8_split_across_chunks() -> None:
    stream = "data: héllo → 世界 🎉\n\n".encode()
    assert decode_bytewise(stream) == [ServerSentEvent(data="héllo → 世界 🎉")]


def test_invalid_utf8_becomes_replacement_character() -> None:
    assert decode(b"data: a\xffb\n\n") == [ServerSentEvent(data="a\ufffdb")]
    assert decode(b"data: a\xe2\x82", b"\n\n") == [ServerSentEvent(data="a\ufffd")]


def test_id_is_set_and_carries_over() -> None:
    stream = b"id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n"
    assert decode(stream) == [
        ServerSentEvent(data="a", id="1"),
        ServerSentEvent(data="b", id="1"),
        ServerSentEvent(data="c", id=""),
    ]


def test_id_with_nul_is_ignored() -> None:
    stream = b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"
    assert decode(stream) == [ServerSentEvent(data="a", id="1"), ServerSentEvent(data="b", id="1")]


def test_retry_only_digits() -> None:
    stream = (
        b"retry: 1500\ndata: a\n\n"
        b"retry: 15x\ndata: b\n\n"
        b"retry: -5\ndata: c\n\n"
        b"retry:\ndata: d\n\n"
        b"retry: \xd9\xa3\ndata: e\n\n"  # ARABIC-INDIC DIGIT THREE: a digit, but not ASCII
        b"retry:  5\ndata: f\n\n"
    )
    assert [(e.data, e.retry) for e in decode(stream)] == [
        ("a", 1500),
        ("b", None),
        ("c", None),
        ("d", None),
        ("e", None),
        ("f", None),
    ]


def test_decoder_remembers_last_id_and_reconnection_time() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"retry: 20\n\nid: abc\n\n")
    assert decoder.reconnection_time == 20
    assert decoder.last_event_id == "abc"


def test_unknown_fields_are_ignored() -> None:
    assert decode(b"foo: bar\ndata: x\nData: y\n\n") == [ServerSentEvent(data="x")]


def test_incomplete_event_at_end_of_stream_is_discarded() -> None:
    assert decode(b"data: a\n\ndata: b\n") == [ServerSentEvent(data="a")]
    assert decode(b"data: a\n\ndata: b") == [ServerSentEvent(data="a")]


def test_flush_resets_for_the_next_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 9\ndata: half") == []
    assert decoder.flush() == []
    assert decoder.feed(b"\xef\xbb\xbfdata: new\n\n") == [ServerSentEvent(data="new", id="9")]


def test_many_events_in_one_chunk() -> None:
    stream = b"".join(b"data: %d\n\n" % i for i in range(100))
    assert [e.data for e in decode(stream)] == [str(i) for i in range(100)]


def test_long_line_in_many_small_chunks() -> None:
    line = "x" * 50_000
    stream = f"data: {line}\n\n".encode()
    assert decode(*(stream[i : i + 7] for i in range(0, len(stream), 7))) == [
        ServerSentEvent(data=line)
    ]


def test_openai_style_stream() -> None:
    stream = (
        b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":"!"}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    assert [e.data for e in decode(stream)] == [
        '{"choices":[{"delta":{"content":"Hi"}}]}',
        '{"choices":[{"delta":{"content":"!"}}]}',
        "[DONE]",
    ]


async def test_aiter_sse() -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for chunk in (b"event: a\r", b"\ndata: 1\r\n", b"\r\n", b"data: cut"):
            yield chunk

    assert [e async for e in aiter_sse(chunks())] == [ServerSentEvent("a", "1")]


# --- property tests ------------------------------------------------------------------------------

_line_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
)


@dataclass(frozen=True)
class _Spec:
    event: str | None
    data: list[str]
    id: str | None
    retry: int | None
    comment: str | None


_events = st.lists(
    st.builds(
        _Spec,
        event=st.none() | _line_text,
        data=st.lists(_line_text, min_size=1, max_size=4),
        id=st.none() | _line_text.filter(lambda s: "\0" not in s),
        retry=st.none() | st.integers(min_value=0, max_value=10**12),
        comment=st.none() | _line_text,
    ),
    max_size=6,
)


def _field(draw: st.DrawFn, name: str, value: str) -> str:
    # "name:value" loses a leading space, so such values always get the separator space.
    if value.startswith(" ") or draw(st.booleans()):
        return f"{name}: {value}"
    return f"{name}:{value}"


@st.composite
def _streams(draw: st.DrawFn) -> tuple[bytes, list[ServerSentEvent]]:
    lines: list[str] = []
    expected: list[ServerSentEvent] = []
    last_id: str | None = None
    for spec in draw(_events):
        fields: list[str] = []  # fields in any order; data lines keep theirs
        if spec.comment is not None:
            fields.append(":" + spec.comment)
        if spec.event is not None:
            fields.append(_field(draw, "event", spec.event))
        if spec.id is not None:
            fields.append(_field(draw, "id", spec.id))
            last_id = spec.id
        if spec.retry is not None:
            fields.append(f"retry: {spec.retry}")
        fields = draw(st.permutations(fields))
        data_lines = [_field(draw, "data", line) for line in spec.data]
        while fields or data_lines:
            queue = data_lines if not fields or (data_lines and draw(st.booleans())) else fields
            lines.append(queue.pop(0))
        lines.append("")
        expected.append(
            ServerSentEvent(spec.event or "message", "\n".join(spec.data), last_id, spec.retry)
        )
    text = ""
    previous_eol = ""
    for line in lines:
        eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        if not line and previous_eol == "\r" and eol == "\n":
            eol = "\r\n"  # a blank line's LF right after a CR would merge into one CRLF
        text += line + eol
        previous_eol = eol
    if draw(st.booleans()):
        text += "data: unfinished"  # discarded at the end of the stream
    bom = "\ufeff" if draw(st.booleans()) else ""
    return (bom + text).encode(), expected


@st.composite
def _split(draw: st.DrawFn, stream: bytes) -> list[bytes]:
    cuts = sorted(draw(st.sets(st.integers(0, len(stream)), max_size=max(1, len(stream) // 2))))
    bounds = [0, *cuts, len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_any_chunking_gives_the_serialised_events(data: st.DataObject) -> None:
    stream, expected = data.draw(_streams())
    chunks = data.draw(_split(stream))
    assert b"".join(chunks) == stream
    whole = decode(stream)
    assert whole == expected
    assert decode(*chunks) == whole


@settings(max_examples=100, deadline=None)
@given(stream=st.binary(max_size=200), data=st.data())
def test_arbitrary_bytes_never_crash_and_chunking_does_not_matter(
    stream: bytes, data: st.DataObject
) -> None:
    assert decode(*data.draw(_split(stream))) == decode(stream)


# --- the fast path (feed_data): the same events as feed, or None and no change --------------


def decode_fast(*chunks: bytes) -> tuple[list[ServerSentEvent], int]:
    """``decode`` with :meth:`SSEDecoder.feed_data` tried first on every chunk; also returns
    how many chunks the fast path took."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    fast = 0
    for chunk in chunks:
        data = decoder.feed_data(chunk)
        if data is None:
            events.extend(decoder.feed(chunk))
        else:
            fast += 1
            events.extend(ServerSentEvent(data=d, id=decoder.last_event_id) for d in data)
    events.extend(decoder.flush())
    return events, fast


def test_fast_path_takes_whole_data_events() -> None:
    chunks = (b'data: {"a": 1}\n\n', b"data:{}\n\ndata: [DONE]\n\n")
    assert decode_fast(*chunks) == (
        [
            ServerSentEvent(data='{"a": 1}'),
            ServerSentEvent(data="{}"),
            *[ServerSentEvent(data="[DONE]")],
        ],
        2,
    )


def test_fast_path_empty_data_is_an_empty_event() -> None:
    assert decode_fast(b"data:\n\ndata: \n\n") == (
        [ServerSentEvent(data=""), ServerSentEvent(data="")],
        1,
    )


@pytest.mark.parametrize(
    "chunk",
    [
        b"data: a\r\n\r\n",  # CRLF
        b"data: a\r\rdata: b\r\r",  # CR
        b": comment\ndata: a\n\n",  # a comment first
        b"data: a\n\n: ping\n\n",  # a comment block after an event
        b"data: a\ndata: b\n\n",  # multi-line data
        b"event: e\ndata: a\n\n",  # another field
        b"data: a\nid: 7\n\n",
        b"data: a\n\n\n\n",  # an empty block
        b"data: a\n\n\ndata: b\n\n",
        b"data: a\n",  # not a whole event
        b"data: a",
        b"\xef\xbb\xbfdata: a\n\n",  # a BOM at the start of the stream
        b"",
    ],
)
def test_fast_path_declines_other_shapes_and_changes_nothing(chunk: bytes) -> None:
    decoder = SSEDecoder()
    assert decoder.feed_data(chunk) is None
    after = b"data: z\n\n"
    events = decoder.feed(chunk) + decoder.feed(after) + decoder.flush()
    assert events == decode(chunk, after)


def test_fast_path_waits_for_a_split_event() -> None:
    # The first chunk leaves a partial line: its rest must not be read as a new event.
    assert decode_fast(b'data: {"a', b'": 1}\n\n', b"data: b\n\n") == (
        [ServerSentEvent(data='{"a": 1}'), ServerSentEvent(data="b")],
        1,
    )
    # A split inside the blank line: "data: a\n" then "\ndata: b\n\n".
    assert decode_fast(b"data: a\n", b"\ndata: b\n\n", b"data: c\n\n") == (
        [ServerSentEvent(data="a"), ServerSentEvent(data="b"), ServerSentEvent(data="c")],
        1,
    )


def test_fast_path_after_a_cr_at_a_chunk_end() -> None:
    # "data: a\r\r" ends with CR: a leading LF of the next chunk belongs to it.
    assert decode_fast(b"data: a\r\r", b"\ndata: b\n\n", b"data: c\n\n") == (
        decode(b"data: a\r\r", b"\ndata: b\n\n", b"data: c\n\n"),
        1,
    )


def test_fast_path_after_a_character_cut_at_a_chunk_end() -> None:
    # The decoder holds the first byte of a 3-byte character after a blank line: the next
    # line starts with it (a field named "\ufffddata", ignored), not with "data:".
    chunks = (b"data: a\n\n\xe2", b"data: b\n\n", b"data: c\n\n")
    assert decode_fast(*chunks) == (decode(*chunks), 1)
    assert decode(*chunks) == [ServerSentEvent(data="a"), ServerSentEvent(data="c")]


def test_fast_path_keeps_the_last_event_id() -> None:
    chunks = (b"id: 7\ndata: a\n\n", b"data: b\n\n")
    assert decode_fast(*chunks) == (
        [ServerSentEvent(data="a", id="7"), ServerSentEvent(data="b", id="7")],
        1,
    )


def test_fast_path_invalid_utf8_becomes_replacement_character() -> None:
    chunks = (b"data: a\xff\n\n", b"data: \xe2\x82\n\n")
    assert decode_fast(*chunks) == (decode(*chunks), 2)
    assert decode(*chunks) == [ServerSentEvent(data="a\ufffd"), ServerSentEvent(data="\ufffd")]


def test_fast_path_after_flush_is_a_new_stream() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: unfinished") == [ServerSentEvent(data="a")]
    assert decoder.feed_data(b"data: b\n\n") is None  # a line is pending
    decoder.flush()
    assert decoder.feed_data(b"data: b\n\n") == ["b"]
    decoder.flush()  # a BOM is looked for again after a flush
    assert decoder.feed_data(b"\xef\xbb\xbfdata: c\n\n") is None
    assert decoder.feed(b"\xef\xbb\xbfdata: c\n\n") == [ServerSentEvent(data="c")]


@st.composite
def _data_streams(draw: st.DrawFn) -> bytes:
    """Mostly what the fast path takes (data-only events, LF), with the odd other line."""
    lines = draw(
        st.lists(
            st.sampled_from(["data: x", "data:y", "data:", "data: [DONE]", ": ping", "id: 1", ""])
            | _line_text.map(lambda s: "data: " + s),
            max_size=12,
        )
    )
    eol = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    return "".join(line + eol + (eol if draw(st.booleans()) else "") for line in lines).encode()


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_fast_path_gives_the_events_of_the_general_path(data: st.DataObject) -> None:
    stream = data.draw(_data_streams() | _streams().map(lambda s: s[0]))
    # Chunks cut anywhere, or at event boundaries (where the fast path applies).
    if data.draw(st.booleans()):
        chunks = data.draw(_split(stream))
    else:
        pieces = stream.split(b"\n\n")
        chunks = [p + b"\n\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    assert decode_fast(*chunks)[0] == decode(*chunks) == decode(stream)


@settings(max_examples=100, deadline=None)
@given(stream=st.binary(max_size=200), data=st.data())
def test_fast_path_on_arbitrary_bytes(stream: bytes, data: st.DataObject) -> None:
    chunks = data.draw(_split(b"data: a\n\n" + stream))
    assert decode_fast(*chunks)[0] == decode(*chunks)
