"""Cassettes: a run recorded against the mock server replays with no server, byte for byte."""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from simplellmfunc import (
    AnthropicCompatible,
    OpenAICompatible,
    OpenAIResponsesCompatible,
    llm_chat,
    llm_function,
    tool,
)
from simplellmfunc.engine import RunResult
from simplellmfunc.exceptions import CassetteError, CassetteMismatchError, ProviderError
from simplellmfunc.hooks import EventYield
from simplellmfunc.providers import LLMInterface, RetryPolicy
from simplellmfunc.testing import (
    Cassette,
    MockLLMServer,
    Reply,
    ToolCallSpec,
    assert_stable_prefix,
    compare_prefixes,
    prefix_drifts,
    use_cassette,
)

SCRIPTS = str(Path(__file__).resolve().parents[1] / "scripts")
GUARD = 10  # seconds: a deadlock guard, never an assertion on speed
KEY = "sk-cassette-secret-0123456789abcdef"
NO_RETRY = RetryPolicy(max_retries=0)
Factory = Callable[[str], LLMInterface]

FACTORIES: dict[str, Factory] = {
    "chat": lambda url: OpenAICompatible(KEY, "mock-model", url, retry_policy=NO_RETRY),
    "responses": lambda url: OpenAIResponsesCompatible(
        KEY, "mock-model", url, retry_policy=NO_RETRY
    ),
    "anthropic": lambda url: AnthropicCompatible(KEY, "claude-test", url, retry_policy=NO_RETRY),
}


@tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def script(server: MockLLMServer) -> None:
    server.script(
        Reply.tool_calls(
            ToolCallSpec("weather", {"city": "Oslo"}, id="c1"),
            ToolCallSpec("weather", {"city": "Rome"}, id="c2"),
            text="Let me check.",
            chunks=3,
            chunk_delay=0.01,
        ),
        Reply.text("Sunny in both, my friend.", chunks=4, chunk_delay=0.005),
    )


def _clockless(value: Any) -> Any:
    """A value without what differs between two runs of the same exchange (clock readings)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _clockless(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.compare and f.name != "duration_s"
        }
    if isinstance(value, tuple | list):
        return [_clockless(v) for v in value]
    return value


def _event_view(item: EventYield) -> dict[str, Any]:
    view: dict[str, Any] = _clockless(item.event)
    return view


async def run_agent(
    llm: LLMInterface, history: list[dict[str, Any]] | None = None
) -> tuple[list[dict[str, Any]], RunResult]:
    @llm_chat(llm, toolkit=[weather], stream=True)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You report the weather."""

    events: list[dict[str, Any]] = []
    result: RunResult | None = None
    with anyio.fail_after(GUARD):
        run = await agent.run("weather in Oslo and Rome?", history=history or [])
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                if isinstance(item, RunResult):
                    result = item
                elif isinstance(item, EventYield):
                    events.append(_event_view(item))
    assert result is not None
    return events, result


@pytest.mark.parametrize("api", sorted(FACTORIES))
async def test_record_then_replay_without_a_server(tmp_path: Path, api: str) -> None:
    path = tmp_path / "run.jsonl"
    async with MockLLMServer() as server:
        script(server)
        url = server.url
        with use_cassette(path, mode="record") as cassette:
            async with FACTORIES[api](url) as llm:
                recorded_events, recorded = await run_agent(llm)
        assert len(server.requests) == 2
    assert len(cassette.interactions) == 2
    streamed = cassette.interactions[0].response
    assert streamed is not None
    assert len(streamed["chunks"]) > 3
    assert streamed["chunks"][-1][0] >= 0.02  # the chunk delays were recorded

    text = path.read_text()
    assert KEY not in text
    assert KEY[-4:] in text
    assert all(json.loads(line) for line in text.splitlines())

    # The server is gone: only the cassette can answer.
    with use_cassette(path, mode="none") as replay:
        async with FACTORIES[api](url) as llm:
            events, result = await run_agent(llm)
    assert replay.all_played
    assert events == recorded_events
    assert result.text == recorded.text == "Sunny in both, my friend."
    assert result.messages == recorded.messages
    assert result.usage == recorded.usage
    assert [e["tool_name"] for e in events if e["kind"] == "tool_call_start"] == ["weather"] * 2


async def test_a_changed_prompt_fails_replay_with_a_diff(tmp_path: Path) -> None:
    path = tmp_path / "fn.jsonl"

    def make(llm: LLMInterface, style: str) -> Any:
        @llm_function(llm)
        async def summarize(text: str) -> str:
            """Summarize the text in one sentence."""

        @llm_function(llm)
        async def summarize_terse(text: str) -> str:
            """Summarize the text in three words."""

        return summarize if style == "sentence" else summarize_terse

    async with MockLLMServer() as server:
        server.script(Reply.text("A cat sat."))
        with use_cassette(path, mode="record"):
            async with FACTORIES["chat"](server.url) as llm:
                assert await make(llm, "sentence")("The cat sat on the mat.") == "A cat sat."
        url = server.url

    with use_cassette(path):  # replay: the same call is answered offline
        async with FACTORIES["chat"](url) as llm:
            assert await make(llm, "sentence")("The cat sat on the mat.") == "A cat sat."

    with pytest.raises(CassetteMismatchError) as caught, use_cassette(path):
        async with FACTORIES["chat"](url) as llm:
            await make(llm, "terse")("The cat sat on the mat.")
    message = str(caught.value)
    assert "matches no recorded request" in message
    assert '-      "content": "Summarize the text in one sentence.' in caught.value.diff
    assert '+      "content": "Summarize the text in three words.' in caught.value.diff
    assert "model" not in caught.value.diff.split("\n", 1)[0]  # only the drifted field

    # A looser matcher (opt-in) answers it anyway.
    with use_cassette(path, match_on=("method", "path", "model")):
        async with FACTORIES["chat"](url) as llm:
            assert await make(llm, "terse")("The cat sat on the mat.") == "A cat sat."


async def test_modes_new_episodes_and_none(tmp_path: Path) -> None:
    path = tmp_path / "episodes.jsonl"
    with pytest.raises(CassetteError, match="does not exist"):
        Cassette(path, mode="none")
    with pytest.raises(CassetteError, match="unknown record mode"):
        Cassette(path, mode="sometimes")  # type: ignore[arg-type]

    async with MockLLMServer(default=Reply.text("42")) as server:

        def ask(llm: LLMInterface) -> Any:
            @llm_function(llm)
            async def answer(question: str) -> str:
                """Answer briefly."""

            return answer

        with use_cassette(path) as first:  # no file yet: "replay" records it (once)
            async with FACTORIES["chat"](server.url) as llm:
                assert await ask(llm)("one?") == "42"
        assert first.mode == "record"
        assert len(server.requests) == 1

        with use_cassette(path, mode="new_episodes") as more:
            async with FACTORIES["chat"](server.url) as llm:
                assert await ask(llm)("one?") == "42"  # from the cassette
                assert await ask(llm)("two?") == "42"  # from the server, appended
        assert len(server.requests) == 2
        assert len(more.interactions) == 2

        with use_cassette(path, mode="none"):
            async with FACTORIES["chat"](server.url) as llm:
                assert await ask(llm)("two?") == "42"
                assert await ask(llm)("one?") == "42"  # any order: the first match answers
                with pytest.raises(CassetteMismatchError, match="no recorded interaction left"):
                    await ask(llm)("one?")
        assert len(server.requests) == 2  # 'none' never used the network


async def test_errors_and_broken_streams_replay_as_they_happened(tmp_path: Path) -> None:
    path = tmp_path / "errors.jsonl"

    def make(llm: LLMInterface) -> Any:
        @llm_function(llm)
        async def answer(question: str) -> str:
            """Answer briefly."""

        return answer

    outcomes: list[str] = []
    async with MockLLMServer() as server:
        server.script(
            Reply.error(429, f"rate limited for key {KEY}"),
            Reply.text("partial answer here", chunks=4, disconnect_after=2),
        )
        with use_cassette(path, mode="record", secrets=["my-org-secret"]):
            async with FACTORIES["chat"](server.url) as llm:
                for question in ("a", "b"):
                    with pytest.raises(ProviderError) as caught:
                        await make(llm)(f"{question} my-org-secret")
                    outcomes.append(type(caught.value).__name__)
        url = server.url
    text = path.read_text()
    assert KEY not in text
    assert "my-org-secret" not in text
    assert "RemoteProtocolError" in text or "ReadError" in text

    with use_cassette(path, mode="none", secrets=["my-org-secret"]) as replay:
        async with FACTORIES["chat"](url) as llm:
            for question, expected in zip(("a", "b"), outcomes, strict=True):
                with pytest.raises(ProviderError) as caught:
                    await make(llm)(f"{question} my-org-secret")
                assert type(caught.value).__name__ == expected
    assert replay.all_played


async def test_an_explicit_transport_and_recorded_timing(tmp_path: Path) -> None:
    path = tmp_path / "transport.jsonl"
    async with MockLLMServer() as server:
        server.script(Reply.text("slow one", chunks=3, chunk_delay=0.05))
        cassette = Cassette(path, mode="record")
        async with (
            httpx.AsyncClient(transport=cassette.transport()) as client,
            OpenAICompatible(KEY, "m", server.url, http_client=client) as llm,
        ):
            pieces = [chunk async for chunk in _stream(llm)]
        url = server.url
    assert "".join(pieces) == "slow one"

    cassette = Cassette(path, mode="none", speed=1.0)  # recorded timing
    start = anyio.current_time()
    async with (
        httpx.AsyncClient(transport=cassette.transport()) as client,
        OpenAICompatible(KEY, "m", url, http_client=client) as llm,
    ):
        assert "".join([chunk async for chunk in _stream(llm)]) == "slow one"
    assert anyio.current_time() - start >= 0.09  # two 0.05 s gaps, replayed


async def _stream(llm: LLMInterface) -> AsyncIterator[str]:
    @llm_chat(llm, stream=True)
    async def echo(message: str, history: list[dict[str, Any]]) -> AsyncIterator[str]:
        """Echo."""

    async with aclosing(echo("hi", history=[])) as items:
        async for text, _ in items:
            yield text


async def test_malformed_cassettes_are_typed_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"cassette": 1}\nnot json\n')
    with pytest.raises(CassetteError, match=r"bad\.jsonl:2: not JSON"):
        Cassette(path)
    path.write_text('{"response": {}}\n')
    with pytest.raises(CassetteError, match="needs a request"):
        Cassette(path)
    with (
        use_cassette(tmp_path / "a.jsonl", mode="record"),
        pytest.raises(CassetteError, match="already in use"),
        use_cassette(tmp_path / "b.jsonl", mode="record"),
    ):
        pass


# -- prompt-prefix stability -------------------------------------------------------------------


async def test_the_prefix_check_catches_a_timestamp_in_the_system_prompt(tmp_path: Path) -> None:
    async with (
        MockLLMServer(default=Reply.text("ok")) as server,
        FACTORIES["chat"](server.url) as llm,
    ):

        @llm_function(llm)
        async def stamped(question: str) -> str:
            """Answer the question. The time is {now}."""

        @llm_function(llm)
        async def stable(question: str) -> str:
            """Answer the question."""

        for question in ("a", "b"):
            now = datetime.now(UTC).isoformat(timespec="microseconds")
            await stamped(question, _template_params={"now": now})
            await anyio.sleep(0.001)
        stamped_requests = server.requests
        server.reset()
        for question in ("a", "b"):
            await stable(question)
        stable_requests = server.requests
    drifts = prefix_drifts(stamped_requests)
    assert len(drifts) == 1
    drift = drifts[0]
    system = stamped_requests[0].json["messages"][0]["content"]
    assert drift.segment == "system"
    # The first differing byte is inside the timestamp, as the system message goes on the wire.
    wire = json.dumps({"role": "system", "content": system}, separators=(",", ":"))
    assert wire.index("The time is ") + len("The time is 2026") < drift.offset < len(wire)
    assert "request 1 vs 0" in str(drift)
    assert "differs at byte" in str(drift)
    with pytest.raises(AssertionError, match="unstable prompt prefix"):
        assert_stable_prefix(stamped_requests)
    assert_stable_prefix(stable_requests)
    assert compare_prefixes(stable_requests, stable_requests) == []
    assert compare_prefixes(stamped_requests, stable_requests)  # across runs too


async def test_an_agent_loop_keeps_its_earlier_turns_stable(tmp_path: Path) -> None:
    async with MockLLMServer() as server:
        script(server)
        async with FACTORIES["chat"](server.url) as llm:
            history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
            await run_agent(llm, history)
        requests = server.requests
    assert prefix_drifts(requests) == []
    edited = json.loads(json.dumps([r.json for r in requests]))
    edited[1]["messages"][2]["content"] = "hello (12:00:01)"  # an earlier turn rewritten
    drifts = prefix_drifts(edited)
    assert [(d.request, d.reference, d.segment) for d in drifts] == [(1, 0, "messages[2]")]


@pytest.mark.live
@pytest.mark.timeout(600)
async def test_record_the_local_model_and_replay_it_without(tmp_path: Path) -> None:
    """Against the real local model (`make test-live`): record, stop the model, replay."""
    sys.path.insert(0, SCRIPTS)
    from local_model import local_llm, local_model

    path = tmp_path / "local.jsonl"

    async def ask(llm: Any) -> tuple[list[dict[str, Any]], RunResult]:
        @llm_chat(llm)
        async def chat(message: str, history: list[dict[str, Any]]) -> None:
            """Answer in one short sentence."""

        events: list[dict[str, Any]] = []
        result: RunResult | None = None
        run = await chat.run("What colour is the sky?", history=[])
        async with aclosing(run.__aiter__()) as items:
            async for item in items:
                if isinstance(item, RunResult):
                    result = item
                elif isinstance(item, EventYield):
                    events.append(_event_view(item))
        assert result is not None
        return events, result

    async with local_model() as base_url:
        with use_cassette(path, mode="record"):
            async with local_llm(base_url) as llm:  # type: ignore[attr-defined]
                recorded_events, recorded = await ask(llm)
    with use_cassette(path, mode="none") as replay:
        async with local_llm(base_url) as llm:  # type: ignore[attr-defined]
            events, result = await ask(llm)
    assert replay.all_played
    assert events == recorded_events
    assert result.text == recorded.text
    assert result.messages == recorded.messages


async def test_replay_checks_the_prefix_against_the_recording(tmp_path: Path) -> None:
    path = tmp_path / "stamped.jsonl"

    def make(llm: LLMInterface) -> Any:
        @llm_function(llm)
        async def stamped(question: str) -> str:
            """Answer the question. The time is {now}."""

        return stamped

    async with MockLLMServer(default=Reply.text("ok")) as server:
        with use_cassette(path, mode="record", check_prefix=True):  # one call: stable
            async with FACTORIES["chat"](server.url) as llm:
                await make(llm)("q", _template_params={"now": "10:00:01"})
        url = server.url
    # A loose matcher answers the drifted prompt; the prefix check still catches the drift.
    loose = ("method", "path", "model")
    with (
        pytest.raises(AssertionError, match=r"request 0 vs 0: the stable prefix differs at byte"),
        use_cassette(path, mode="none", match_on=loose, check_prefix=True) as replay,
    ):
        async with FACTORIES["chat"](url) as llm:
            assert await make(llm)("q", _template_params={"now": "10:00:02"}) == "ok"
    assert replay.all_played
    drift = replay.prefix_drifts()[0]
    assert (drift.segment, drift.expected[-5:], drift.actual[-5:]) == ("system", '01."}', '02."}')
