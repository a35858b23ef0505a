"""The Chat Completions stream parser: the SSE fast path (whole ``data:`` events per network
chunk) gives the same stream events, reply and typed errors as the general path (any split)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from simplellmfunc.exceptions import StreamError
from simplellmfunc.providers import LLMResponse, StreamEvent, TextDelta
from simplellmfunc.providers._openai._parser import ChatStreamParser


def _event(payload: Any) -> bytes:
    return b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode())


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "c",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [choice],
        **extra,
    }


STREAM = [
    _chunk({"role": "assistant"}),
    _chunk({"reasoning_content": "think"}),
    _chunk({"content": "Hel"}),
    _chunk({"content": "lo \\ud83d"}),  # a lone surrogate, escaped
    _chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "f", "arguments": "{"}}]}),
    _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"a": 1}'}}]}),
    _chunk({}, "tool_calls"),
    {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5}},
]


def _wire(event: dict[str, Any]) -> bytes:
    """``event`` as a server writes it; ``\\ud83d`` in a string becomes the JSON escape of a
    lone surrogate (json.dumps would escape the backslash)."""
    return json.dumps(event).replace("\\\\ud83d", "\\ud83d").encode()


def _body(events: list[Any], sep: bytes = b"\n\n") -> list[bytes]:
    """One network chunk per event (the fast path's shape), then ``[DONE]``."""
    return [_event(e) + sep for e in events] + [b"data: [DONE]" + sep]


def _parse(chunks: list[bytes]) -> tuple[list[StreamEvent], LLMResponse]:
    parser = ChatStreamParser("test", "req-1")
    events: list[StreamEvent] = []
    for chunk in chunks:
        events += parser.feed_bytes(chunk)
    return events, parser.response()


def _bytewise(chunks: list[bytes]) -> list[bytes]:
    body = b"".join(chunks)
    return [body[i : i + 1] for i in range(len(body))]


def _fast_chunks(parser: ChatStreamParser, chunks: list[bytes]) -> int:
    return sum(parser.decoder.feed_data(c) is not None for c in chunks)


def test_fast_path_gives_the_events_and_reply_of_the_general_path() -> None:
    chunks = _body([_wire(e) for e in STREAM])
    assert _fast_chunks(ChatStreamParser("test", None), chunks) == len(chunks)
    fast = _parse(chunks)
    assert fast == _parse(_bytewise(chunks))  # the general path, split anywhere
    assert fast == _parse([b"".join(chunks)])  # all in one network chunk
    events, reply = fast
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["Hel", "lo \ufffd"]
    assert reply.text == "Hello \ufffd"
    assert reply.finish_reason == "tool_calls"
    assert [c.arguments for c in reply.message.tool_calls] == ['{"a": 1}']
    assert reply.usage.completion_tokens == 5


def test_crlf_stream_gives_the_same_reply() -> None:
    chunks = _body([_wire(e) for e in STREAM])
    crlf = [c.replace(b"\n", b"\r\n") for c in chunks]
    assert _fast_chunks(ChatStreamParser("test", None), crlf) == 0
    assert _parse(crlf) == _parse(chunks)


def test_invalid_utf8_in_a_fast_chunk_becomes_replacement_character() -> None:
    chunks = [b'data: {"choices": [{"delta": {"content": "a\xff"}}]}\n\n', b"data: [DONE]\n\n"]
    events, reply = _parse(chunks)
    assert reply.text == "a\ufffd"
    assert _parse(_bytewise(chunks)) == (events, reply)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (b"{not json", "malformed stream chunk"),
        (b'{"a": 1} trailing', "malformed stream chunk"),
        (b"[1, 2]", "stream chunk is not an object"),
        (b'{"error": {"message": "overloaded"}}', "error in stream: .*overloaded"),
        (b'{"choices": {"0": {}}}', "choices are not a list"),
        (b'{"choices": ["x"]}', "chunk without a delta"),
        (b'{"choices": [{"delta": "x"}]}', "chunk without a delta"),
    ],
)
def test_bad_chunks_are_typed_errors_on_both_paths(event: bytes, message: str) -> None:
    chunks = [_event(_chunk({"content": "ok"})) + b"\n\n", _event(event) + b"\n\n"]
    for split in (chunks, _bytewise(chunks)):
        with pytest.raises(StreamError, match=message) as caught:
            _parse(split)
        assert caught.value.provider == "test"
        assert caught.value.request_id == "req-1"
        assert not caught.value.retryable


def test_error_event_is_a_typed_error() -> None:
    with pytest.raises(StreamError, match="error event in stream: boom"):
        _parse([b"data: {}\n\n", b"event: error\ndata: boom\n\n"])


def test_empty_and_blank_data_carry_nothing() -> None:
    chunks = [b"data:\n\ndata:  \n\n", *_body([_chunk({"content": "x"}, "stop")])]
    events, reply = _parse(chunks)
    assert reply.text == "x"
    assert _parse(_bytewise(chunks)) == (events, reply)


def test_nothing_after_done_is_parsed() -> None:
    chunks = [*_body([_chunk({"content": "x"}, "stop")]), b"data: {not json\n\n"]
    events, reply = _parse(chunks)
    assert reply.text == "x"
    assert _parse(_bytewise(chunks)) == (events, reply)


def test_stream_cut_before_the_end_is_a_typed_error() -> None:
    with pytest.raises(StreamError, match="ended before the reply was complete"):
        _parse([_event(_chunk({"content": "x"})) + b"\n\n"])
