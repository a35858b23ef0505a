"""Text that is not valid Unicode, at the wire: lone surrogates and UTF-8 cut inside a character.

A lone surrogate is what ``os.listdir()`` returns for a file name that is not UTF-8
(``b"bad\\xff name"`` → ``"bad\\udcff name"``) and what a JSON ``"\\ud83d"`` escape decodes to
(servers that cut a string inside a UTF-16 pair send it). Such text cannot be encoded as UTF-8;
at the provider boundary it is sent as U+FFFD, and text the model sends back is valid Unicode
(U+FFFD in place of what was not), whatever the provider, streamed or not, in every decorator mode.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from simplellmfunc import llm_chat, llm_function, tool
from simplellmfunc.events import EventYield, ReactEndEvent, ResponseYield
from simplellmfunc.providers import (
    AnthropicCompatible,
    FinishEvent,
    HTTPInterface,
    LLMRequest,
    LLMResponse,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    StreamEvent,
    TextDelta,
    _tokens,
)
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    history_from_dicts,
    validate_history,
)

KEY = "sk-unicode-test-0123456789"
LONE = "bad\udcff name"  # os.listdir() of the file b"bad\xff name"
SENT = "bad\ufffd name"
SURROGATE = re.compile("[\ud800-\udfff]")
GUARD = 20  # seconds: a deadlock guard, never an assertion on speed
PROVIDERS: dict[str, type[HTTPInterface]] = {
    "chat": OpenAICompatible,
    "responses": OpenAIResponsesCompatible,
    "anthropic": AnthropicCompatible,
}


@pytest.fixture(params=sorted(PROVIDERS))
def api(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def llm(api: str, mock_server: MockLLMServer) -> AsyncIterator[HTTPInterface]:
    async with PROVIDERS[api](KEY, "mock-model", mock_server.url) as llm:
        yield llm


def sent_text(server: MockLLMServer, n: int = -1) -> str:
    """Request ``n`` as the server decoded it (strict UTF-8), as one string."""
    return json.dumps(server.requests[n].json, ensure_ascii=False)


async def call(llm: HTTPInterface, request: LLMRequest, stream: bool) -> LLMResponse:
    with anyio.fail_after(GUARD):
        if not stream:
            return await llm.complete(request)
        received: list[StreamEvent] = []
        async with aclosing(llm.stream(request)) as events:
            async for event in events:
                received.append(event)
        for event in received[:-1]:
            if isinstance(event, TextDelta):
                assert not SURROGATE.search(event.text), event
        final = received[-1]
        assert isinstance(final, FinishEvent)
        return final.response


# -- the request ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_every_text_of_a_request_is_sent_with_replacement_characters(
    mock_server: MockLLMServer, llm: HTTPInterface, stream: bool
) -> None:
    arguments = json.dumps({"path": LONE}, ensure_ascii=False)
    messages = (
        SystemMessage(f"system {LONE}"),
        UserMessage(f"user {LONE}"),
        AssistantMessage(f"assistant {LONE}", (ToolCall("c1", "ls", arguments),)),
        ToolMessage("c1", f"result {LONE}"),
    )
    mock_server.script(Reply.text("fine", usage=None))  # usage counted locally: the estimate too
    response = await call(llm, LLMRequest(messages), stream)
    assert response.text == "fine"
    assert response.usage.estimated
    sent = sent_text(mock_server)
    for where in ("system", "user", "assistant", "result"):
        assert f"{where} {SENT}" in sent
    assert not SURROGATE.search(sent)


async def test_a_surrogate_pair_is_sent_as_the_character_it_encodes(
    mock_server: MockLLMServer, llm: HTTPInterface
) -> None:
    mock_server.script(Reply.text("fine"))
    await llm.complete(LLMRequest((UserMessage("smile \ud83d\ude00 and lone \ud83d"),)))
    assert "smile \U0001f600 and lone \ufffd" in sent_text(mock_server)


def test_the_offline_token_estimate_counts_lone_surrogates(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # no encodings: the estimate
    _tokens._clear_cache()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            assert _tokens.count_text_tokens(LONE) == 3  # 12 bytes, as U+FFFD is sent
            assert _tokens.count_message_tokens([ToolMessage("c1", LONE)]) == 3 + 3 + 1 + 3
    finally:
        _tokens._clear_cache()


# -- the reply ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
@pytest.mark.parametrize(
    ("wire", "text", "expected"),
    [
        ("escape", "cut \ud83d", "cut \ufffd"),  # a JSON "\ud83d" escape: half a UTF-16 pair
        ("bytes", "cut \udce4\udcb8", "cut \ufffd"),  # b"\xe4\xb8": two bytes of "中" out of 3
        ("escape", LONE, SENT),
    ],
    ids=["escaped-half-pair", "utf8-cut-in-a-character", "escaped-lone-low"],
)
async def test_reply_text_that_is_not_unicode_arrives_with_replacement_characters(
    mock_server: MockLLMServer,
    llm: HTTPInterface,
    stream: bool,
    wire: Any,
    text: str,
    expected: str,
) -> None:
    mock_server.script(Reply.text(text, chunks=3, surrogates=wire))
    response = await call(llm, LLMRequest((UserMessage("hi"),)), stream)
    assert response.text == expected


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_tool_arguments_that_are_not_unicode_arrive_with_replacement_characters(
    mock_server: MockLLMServer, llm: HTTPInterface, stream: bool
) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("ls", {"path": LONE}, id="c1"), chunks=2))
    response = await call(llm, LLMRequest((UserMessage("hi"),)), stream)
    (called,) = response.message.tool_calls
    assert json.loads(called.arguments) == {"path": SENT}


# -- the test kit ---------------------------------------------------------------------------------


async def test_the_mock_server_takes_escaped_surrogates_and_refuses_invalid_utf8(
    mock_server: MockLLMServer,
) -> None:
    # json.dumps escapes a lone surrogate (valid JSON text); the reply echoes request fields.
    body = {"model": f"m {LONE}", "instructions": LONE, "input": LONE}
    mock_server.script(Reply.text("ok"), Reply.text("ok"))
    async with httpx.AsyncClient(base_url=mock_server.url) as http:
        response = await http.post("/responses", content=json.dumps(body))
        assert response.status_code == 200
        assert response.json()["instructions"] == LONE
        assert mock_server.requests[-1].json["input"] == LONE
        raw = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogateescape")
        response = await http.post("/responses", content=raw)
    assert response.status_code == 400
    assert "not valid UTF-8" in response.json()["error"]["message"]
    assert mock_server.pending == 1


# -- the decorators -------------------------------------------------------------------------------


@tool
async def ls() -> str:
    """List the files."""
    return LONE


def _script(server: MockLLMServer) -> None:
    server.script(
        Reply.tool_calls(ToolCallSpec("ls", {}, id="c1")),
        Reply.text(f"found {LONE}", surrogates="escape"),
        Reply.text("again"),
    )


async def _check(server: MockLLMServer, history: list[dict[str, Any]]) -> None:
    # The tool result was sent as U+FFFD; the model's text came back as valid Unicode.
    assert SENT in sent_text(server, 1)
    validate_history(history_from_dicts(history))
    assert (history[-1]["role"], history[-1]["content"]) == ("assistant", f"found {SENT}")


@pytest.mark.parametrize("mode", ["plain", "stream", "events"])
async def test_llm_chat_goes_on_and_its_history_can_be_sent_again(
    mock_server: MockLLMServer, llm: HTTPInterface, mode: str
) -> None:
    _script(mock_server)

    @llm_chat(llm, toolkit=[ls], stream=mode == "stream", enable_event=mode == "events")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """Help."""

    histories: list[list[dict[str, Any]]] = []
    with anyio.fail_after(GUARD):
        async with aclosing(agent("list", history=[])) as items:
            async for item in items:
                if isinstance(item, ResponseYield):
                    histories.append(item.messages)
                elif isinstance(item, EventYield) and isinstance(item.event, ReactEndEvent):
                    validate_history(history_from_dicts(item.event.final_messages))
                elif isinstance(item, tuple):
                    histories.append(item[1])
        await _check(mock_server, histories[-1])
        async with aclosing(agent("again", history=histories[-1])) as items:
            async for _ in items:
                pass
    assert not SURROGATE.search(sent_text(mock_server, 2))


async def test_llm_function_goes_on(mock_server: MockLLMServer, llm: HTTPInterface) -> None:
    _script(mock_server)

    @llm_function(llm, toolkit=[ls])
    async def find(what: str) -> str:
        """Find the file."""

    with anyio.fail_after(GUARD):
        assert await find("the bad one") == f"found {SENT}"
    assert SENT in sent_text(mock_server, 1)
