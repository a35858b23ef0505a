"""Tool protocols as strategy objects (issue 29), seed 001 §3/§4 engine items (issue 30), no
silent empty or truncated answers (issue 28) and no JSON wrapper reaching a reader (issue 27),
all against the mock LLM server."""

from __future__ import annotations

import ast
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simplellmfunc.engine as engine_pkg
from simplellmfunc import OpenAICompatible, llm_chat, llm_function, tool
from simplellmfunc.engine._json_protocol import (
    ANSWER_PLACEHOLDER,
    AnswerStream,
    JSONProtocol,
    parse_step,
)
from simplellmfunc.engine._protocol import NativeProtocol, ToolCallProtocol
from simplellmfunc.engine._text_protocol import HeldCalls, TextProtocol
from simplellmfunc.events import EventYield, ReactEndEvent
from simplellmfunc.exceptions import IncompleteAnswerError
from simplellmfunc.providers import Capabilities
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
from simplellmfunc.types import history_from_dicts

GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
TEXT = Capabilities(native_tools=False, json_schema=False)
JSON_CAPS = Capabilities(native_tools=False, json_schema=True)
_PROTOCOL_FLAGS = {"text_protocol", "json_protocol", "tool_protocol"}


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    async with OpenAICompatible(None, "m", mock_server.url) as model:
        yield model


def model(server: MockLLMServer, caps: Capabilities) -> OpenAICompatible:
    return OpenAICompatible(None, "m", server.url, capabilities=caps)


def step(**fields: Any) -> Reply:
    return Reply.text(json.dumps(fields))


async def events_of(agent: Any, message: str) -> list[Any]:
    with anyio.fail_after(GUARD):
        return [i.event async for i in agent(message, history=[]) if isinstance(i, EventYield)]


def test_the_engine_reads_no_protocol_flag() -> None:
    """The loop asks the run's protocol object; only the resolver reads ``tool_protocol``."""
    folder = Path(engine_pkg.__file__).parent
    readers: set[tuple[str, str]] = set()
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Attribute) and node.attr in _PROTOCOL_FLAGS:
                    readers.add((path.name, function.name))
    # The resolver (once per invocation) and the option's own validation; nothing else.
    assert readers == {("_invocation.py", "resolve_protocol"), ("_options.py", "__post_init__")}


def test_the_protocols_read_replies_through_one_entry() -> None:
    """``plan``'s signature is written once (the engine's entry); a protocol implements
    ``read(ReplyContext)``."""
    for cls in (NativeProtocol, TextProtocol, JSONProtocol):
        assert "plan" not in vars(cls), cls
        assert "read" in vars(cls), cls
    assert ToolCallProtocol.__abstractmethods__ == frozenset({"read"})


async def test_auto_picks_native_then_json_then_text(mock_server: MockLLMServer) -> None:
    """``tool_protocol="auto"``: native tools if the provider has them, else the JSON protocol
    when it has json_schema (llama.cpp with a small model), else the text protocol."""
    for caps in (Capabilities(), JSON_CAPS, TEXT):
        mock_server.script(Reply.text("ok") if caps.native_tools else step_or_text(caps))
        async with model(mock_server, caps) as llm:

            @llm_function(llm, toolkit=[add])
            async def ask(question: str) -> str:
                """Answer."""

            with anyio.fail_after(GUARD):
                assert await ask("hi") == "ok"
    native, json_run, text_run = (r.json for r in mock_server.requests)
    assert native["tools"]
    assert "response_format" not in native
    assert "tools" not in json_run
    assert json_run["response_format"]["json_schema"]["name"] == "agent_step"
    assert "tools" not in text_run
    assert "response_format" not in text_run
    assert '"action": "terminate"' in text_run["messages"][0]["content"]  # the text catalogue


def step_or_text(caps: Capabilities) -> Reply:
    return step(action="final_answer", answer="ok") if caps.json_schema else Reply.text("ok")


async def test_terminate_in_the_seeds_form_ends_the_run_with_its_answer(
    mock_server: MockLLMServer,
) -> None:
    """Seed 001 §3.4 tells the model ``{"action": "terminate", "answer": "..."}``."""
    mock_server.script(
        Reply.text('```json\n{"action": "add", "input": {"a": 40, "b": 2}}\n```'),
        Reply.text('{"action": "terminate", "answer": "42"}'),
    )
    async with model(mock_server, TEXT) as llm:

        @llm_chat(llm, toolkit=[add], enable_event=True, max_tool_calls=3)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You add numbers."""

        events = await events_of(agent, "40 + 2?")
    end = next(e for e in events if isinstance(e, ReactEndEvent))
    assert (end.final_response, end.terminated_by) == ("42", "terminate")
    history_from_dicts(end.final_messages)
    first, second = (r.json["messages"][0]["content"] for r in mock_server.requests)
    # Seed §3.4: every step's prompt says where the run stands.
    assert "[Step 1/3, remaining: 2]" in first
    assert "[Step 2/3, remaining: 1]" in second
    assert "Running low on steps" in second


async def test_observations_off_hides_results_from_the_model_not_the_history(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 40, "b": 2})), Reply.text("done"))

    @llm_chat(llm, toolkit=[add], enable_event=True, observation_enabled=False)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You add numbers."""

    events = await events_of(agent, "40 + 2?")
    sent = mock_server.requests[1].json["messages"]
    assert [m["content"] for m in sent if m["role"] == "tool"] == [engine_pkg.HIDDEN_OBSERVATION]
    end = next(e for e in events if isinstance(e, ReactEndEvent))
    assert [m["content"] for m in end.final_messages if m["role"] == "tool"] == ["42"]


async def test_an_empty_answer_is_asked_again_then_raised_in_every_mode(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    """Issue 28: no silent empty answers (a reasoning-only reply has no answer)."""

    @llm_chat(llm)
    async def plain(message: str, history: list[dict[str, Any]]) -> None:
        """You answer."""

    @llm_chat(llm, stream=True)
    async def streamed(message: str, history: list[dict[str, Any]]) -> None:
        """You answer."""

    @llm_chat(llm, enable_event=True)
    async def evented(message: str, history: list[dict[str, Any]]) -> None:
        """You answer."""

    @llm_function(llm)
    async def typed(question: str) -> str:
        """Answer."""

    async def drain(agent: Any) -> None:
        async for _ in agent("hi", history=[]):
            pass

    runs = [drain(plain), drain(streamed), drain(evented), typed("hi")]
    for run in runs:
        mock_server.script(Reply.text("", reasoning="hmm"), Reply.text("", reasoning="hmm"))
        with anyio.fail_after(GUARD), pytest.raises(IncompleteAnswerError) as caught:
            await run
        assert caught.value.reason == "empty"
        history_from_dicts(caught.value.messages)  # valid for the next call
    nudged = mock_server.requests[1].json["messages"][-1]
    assert nudged["role"] == "user"
    assert "no answer" in nudged["content"]

    mock_server.script(Reply.text("", reasoning="hmm"), Reply.text("42"))  # the retry helps
    with anyio.fail_after(GUARD):
        assert await typed("hi") == "42"


async def test_a_truncated_answer_is_retried_or_flagged(
    mock_server: MockLLMServer, llm: OpenAICompatible
) -> None:
    mock_server.script(Reply.text("The answer is 4", finish_reason="length"), Reply.text("42"))

    @llm_function(llm)
    async def typed(question: str) -> str:
        """Answer."""

    with anyio.fail_after(GUARD):
        assert await typed("hi") == "42"
    assert "cut off" in mock_server.requests[1].json["messages"][-1]["content"]

    @llm_chat(llm, enable_event=True, answer_retries=0, incomplete_answer="flag")
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You answer."""

    mock_server.script(Reply.text("The answer is 4", finish_reason="length"))
    end = next(e for e in await events_of(agent, "hi") if isinstance(e, ReactEndEvent))
    assert (end.terminated_by, end.final_response) == ("truncated", "The answer is 4")


async def test_a_json_step_cut_by_max_tokens_never_shows_its_wrapper(
    mock_server: MockLLMServer,
) -> None:
    """Issue 27: ``{"action": "final_answer", "answer": "42} ...`` cut by max_tokens: the
    streamed text is the answer's content only, and the cut is a typed truncation."""
    cut = '{"action": "final_answer", "answer": "42} ...'
    mock_server.script(
        step(action="add", action_input={"a": 40, "b": 2}),
        Reply.text(cut, finish_reason="length", chunks=6),
        Reply.text(cut, chunks=6),  # a server that says "stop": the cut JSON tells the truth
    )
    async with model(mock_server, JSON_CAPS) as llm:

        @llm_chat(llm, toolkit=[add], stream=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You add numbers."""

        shown: list[str] = []

        async def read() -> None:
            async for text, _ in agent("40 + 2?", history=[]):
                shown.append(text)

        with anyio.fail_after(GUARD), pytest.raises(IncompleteAnswerError) as caught:
            await read()
    assert caught.value.reason == "truncated"
    assert caught.value.text == "42} ..."  # repaired: the answer's content, no wrapper
    assert "action" not in "".join(shown)
    assert "".join(shown) == "42} ..." * 2
    history_from_dicts(caught.value.messages)


@given(st.text(), st.lists(st.integers(min_value=1, max_value=7), max_size=40), st.booleans())
def test_the_answer_stream_shows_exactly_the_answer(
    answer: str, cuts: list[int], ascii_only: bool
) -> None:
    """However the step's JSON is cut into deltas, the pieces shown are the answer's string."""
    text = json.dumps({"action": "final_answer", "answer": answer}, ensure_ascii=ascii_only)
    view, shown, at = AnswerStream(), [], 0
    for size in [*cuts, len(text)]:
        shown.append(view.feed(text[at : at + size]))
        at += size
    assert "".join(shown) == answer
    assert parse_step(text).answer == answer


def test_a_cut_step_is_repaired() -> None:
    cut = parse_step('{"action": "final_answer", "answer": "Snow in Os')
    assert (cut.answer, cut.repaired) == ("Snow in Os", True)
    call = parse_step('{"action": "add", "action_input": {"a": 4')
    assert call.error is not None
    assert "cut off" in call.error


async def test_text_protocol_streams_prose_and_the_answer_never_the_calls(
    mock_server: MockLLMServer,
) -> None:
    mock_server.script(
        Reply.text(
            'Let me add.\n```json\n{"action": "add", "input": {"a": 40, "b": 2}}\n```', chunks=7
        ),
        Reply.text('{"action": "terminate", "answer": "42"}', chunks=5),
    )
    async with model(mock_server, TEXT) as llm:

        @llm_chat(llm, toolkit=[add], stream=True)
        async def agent(message: str, history: list[dict[str, Any]]) -> None:
            """You add numbers."""

        items: list[tuple[str, list[dict[str, Any]]]] = []
        with anyio.fail_after(GUARD):
            items = [item async for item in agent("40 + 2?", history=[])]
    assert "".join(text for text, _ in items) == "Let me add.\n42"
    assert items[-1][1][-1] == {"role": "assistant", "content": "42"}  # the answer, no wrapper


@given(st.text(), st.lists(st.integers(min_value=1, max_value=7), max_size=40))
def test_held_calls_show_the_prose_before_a_call_and_nothing_of_it(
    prose: str, cuts: list[int]
) -> None:
    """However a text-protocol reply is cut into deltas, what streams is the prose before the
    call's start (all of it when there is no call), never a piece of the call."""
    call = '```json\n{"action": "add", "input": {"a": 1, "b": 2}}\n```'
    for text in (prose, prose + call):
        view, shown, at = HeldCalls(), [], 0
        for size in [*cuts, len(text)]:
            shown.append(view.feed(text[at : at + size]))
            at += size
        joined = "".join(shown)
        assert text.startswith(joined)
        assert "action" not in joined[len(prose) :]
        if "```" not in prose and "{" not in prose and "<" not in prose:
            assert joined == prose or (text == prose and prose.startswith(joined))


@given(st.text(min_size=1), st.data(), st.booleans())
def test_a_step_cut_anywhere_in_its_answer_gives_a_prefix_of_it(
    answer: str, data: st.DataObject, ascii_only: bool
) -> None:
    text = json.dumps({"action": "final_answer", "answer": answer}, ensure_ascii=ascii_only)
    begin = text.index('"answer": "') + len('"answer": "')
    cut = data.draw(st.integers(min_value=begin, max_value=len(text) - 2))
    step_ = parse_step(text[:cut])
    assert step_.repaired
    assert step_.answer is not None
    assert answer.startswith(step_.answer)


async def test_the_catalogues_placeholder_copied_as_the_answer_is_no_answer(
    mock_server: MockLLMServer,
) -> None:
    """SmolLM2 answered with the JSON catalogue's placeholder word for word (issue 28): that is
    an empty answer, nudged once, never handed to the user as the reply."""
    placeholder = ANSWER_PLACEHOLDER
    mock_server.script(
        step(action="final_answer", answer=placeholder), step(action="final_answer", answer="42")
    )
    async with model(mock_server, JSON_CAPS) as llm:

        @llm_function(llm, toolkit=[add])
        async def ask(question: str) -> str:
            """Answer."""

        with anyio.fail_after(GUARD):
            assert await ask("40 + 2?") == "42"
    assert placeholder in mock_server.requests[0].json["messages"][0]["content"]
    assert "no answer" in mock_server.requests[1].json["messages"][-1]["content"]
