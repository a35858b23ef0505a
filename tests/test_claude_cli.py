"""ClaudeCodeCLI against a fake ``claude`` executable (tests/fake_claude/claude.py) that records
its command line and stdin: sessions, deltas, flags, errors, timeouts and process cleanup."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from conftest import settle
from simplellmfunc import llm_chat
from simplellmfunc._content import ImgUrl, Text
from simplellmfunc._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from simplellmfunc.exceptions import ConfigError, ProviderError, ProviderTimeoutError
from simplellmfunc.providers import FinishEvent, LLMRequest, TextDelta
from simplellmfunc.providers._claude_cli import ClaudeCodeCLI

FAKE = Path(__file__).parent / "fake_claude" / "claude.py"
GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
SYSTEM = SystemMessage("Be brief.")


class Fake:
    """The fake CLI behind a launcher script, and what it recorded."""

    def __init__(self, tmp_path: Path) -> None:
        self.executable = tmp_path / "claude"
        self.executable.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
        self.executable.chmod(0o755)
        self.log = tmp_path / "calls.jsonl"

    def llm(self, mode: str = "ok", **options: Any) -> ClaudeCodeCLI:
        env = {"FAKE_CLAUDE_LOG": str(self.log), "FAKE_CLAUDE_MODE": mode}
        return ClaudeCodeCLI(executable=self.executable, env=env, **options)

    def records(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def argv(self, index: int = -1) -> list[str]:
        argv: list[str] = self.records()[index]["argv"]
        return argv


@pytest.fixture
def fake(tmp_path: Path) -> Fake:
    return Fake(tmp_path)


@pytest.fixture(autouse=True)
def _no_orphans() -> Iterator[None]:
    """Nothing the CLI started may outlive a test (children of this process, or strays)."""
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    left = [p for p in me.children(recursive=True) if p.pid not in before]
    assert not [p for p in left if _alive(p.pid)], f"child processes left: {left}"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


async def _gone(pids: list[int]) -> bool:
    # A killed grandchild is reaped by init (or stays a zombie under a non-reaping PID 1).
    return await settle(lambda: not any(_alive(pid) for pid in pids), 10.0)


def req(*messages: Message, timeout: float | None = None) -> LLMRequest:
    return LLMRequest(tuple(messages), timeout=timeout)


async def test_first_call_argv_session_and_usage(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        response = await llm.complete(req(SYSTEM, UserMessage("hi")))
    assert fake.argv() == ["-p", "hi", "--output-format", "json", "--system-prompt", "Be brief."]
    assert fake.records()[-1]["stdin"] == ""
    assert response.text == "reply to: hi"
    assert response.provider == "claude-code"
    assert response.model == "claude-fake-1"
    assert response.finish_reason == "stop"
    assert llm.session_id is not None
    assert response.request_id == llm.session_id
    assert llm.seen_count == 2
    usage = response.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) == (1103, 5, 1000)
    assert usage.total_tokens == 1108
    assert not usage.estimated


async def test_resumed_call_sends_only_new_messages(fake: Fake) -> None:
    llm = fake.llm()
    first = (SYSTEM, UserMessage("hi"))
    with anyio.fail_after(GUARD):
        reply = await llm.complete(req(*first))
        session = llm.session_id
        second = (*first, reply.message, UserMessage("and now?"))
        await llm.complete(req(*second))
        assert fake.argv() == [
            "-p",
            "and now?",
            "--output-format",
            "json",
            "--resume",
            str(session),
            "--system-prompt",
            "Be brief.",
        ]
        assert llm.session_id == session
        assert llm.seen_count == 4
        # A tool round: the assistant's calls are already in the session; only results go.
        call = AssistantMessage("checking", (ToolCall("c1", "weather", '{"city": "Oslo"}'),))
        third = (*second, AssistantMessage("Sure."), UserMessage("weather?"))
        await llm.complete(req(*third))
        assert fake.argv()[:2] == ["-p", "weather?"]
        await llm.complete(req(*third, call, ToolMessage("c1", "sunny")))
    prompt = fake.argv()[1]
    assert prompt == '<tool_result name="weather" id="c1">\nsunny\n</tool_result>'
    assert "--resume" in fake.argv()
    assert len(fake.records()) == 4


async def test_a_changed_history_starts_a_new_session(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        reply = await llm.complete(req(SYSTEM, UserMessage("hi")))
        old = llm.session_id
        edited = (SYSTEM, UserMessage("hello"), reply.message, UserMessage("next"))
        await llm.complete(req(*edited))
    argv = fake.argv()
    assert "--resume" not in argv
    assert argv[1] == (
        "<user>\nhello\n</user>\n\n<assistant>\nreply to: hi\n</assistant>\n\n<user>\nnext\n</user>"
    )
    assert llm.session_id != old


async def test_nothing_new_starts_a_new_session(fake: Fake) -> None:
    llm = fake.llm()
    messages = (SYSTEM, UserMessage("hi"))
    with anyio.fail_after(GUARD):
        await llm.complete(req(*messages))
        await llm.complete(req(*messages))  # the same transcript again: ask anew
    assert "--resume" not in fake.argv()
    assert fake.argv()[1] == "hi"


async def test_reset_session(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        reply = await llm.complete(req(SYSTEM, UserMessage("hi")))
        llm.reset_session()
        assert llm.session_id is None
        assert llm.seen_count == 0
        await llm.complete(req(SYSTEM, UserMessage("hi"), reply.message, UserMessage("again")))
    assert "--resume" not in fake.argv()
    assert fake.argv()[1].startswith("<user>\nhi\n</user>")


async def test_session_id_follows_the_cli(fake: Fake) -> None:
    llm = fake.llm("rotate")
    with anyio.fail_after(GUARD):
        reply = await llm.complete(req(UserMessage("hi")))
        first = llm.session_id
        await llm.complete(req(UserMessage("hi"), reply.message, UserMessage("more")))
    assert fake.argv()[fake.argv().index("--resume") + 1] == first
    assert llm.session_id not in (None, first)


async def test_permission_flags_are_explicit(fake: Fake) -> None:
    with anyio.fail_after(GUARD):
        await fake.llm().complete(req(UserMessage("hi")))
        plain = fake.argv()
        llm = fake.llm(
            model="sonnet",
            permission_mode="acceptEdits",
            allowed_tools=["Read", "Bash(git log:*)"],
            extra_args=["--max-turns", "3"],
        )
        response = await llm.complete(req(UserMessage("hi")))
    assert plain == ["-p", "hi", "--output-format", "json"]
    assert fake.argv() == [
        "-p",
        "hi",
        "--output-format",
        "json",
        "--model",
        "sonnet",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Read,Bash(git log:*)",
        "--max-turns",
        "3",
    ]
    assert response.model == "sonnet"


async def test_cwd_and_env(fake: Fake, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = {"FAKE_CLAUDE_LOG": str(fake.log), "CLAUDE_EXTRA": "1"}
    llm = ClaudeCodeCLI(executable=fake.executable, cwd=work, env=env)
    with anyio.fail_after(GUARD):
        await llm.complete(req(UserMessage("hi")))
    record = fake.records()[-1]
    assert record["cwd"] == str(work)
    assert record["env"]["CLAUDE_EXTRA"] == "1"
    assert record["pgid"] == record["pid"]  # a process group of its own


# Short ids: pytest puts the test id in the child's environment (PYTEST_CURRENT_TEST), and a
# 150 kB id is an argument the kernel refuses (E2BIG).
@pytest.mark.parametrize("prompt", ["x" * 150_000, "- a list item first"], ids=["long", "dash"])
async def test_long_or_dash_prompts_go_through_stdin(fake: Fake, prompt: str) -> None:
    with anyio.fail_after(GUARD):
        response = await fake.llm().complete(req(UserMessage(prompt)))
    assert fake.argv() == ["-p", "--output-format", "json"]
    assert fake.records()[-1]["stdin"] == prompt
    assert response.text == f"reply to: {prompt}"


@pytest.mark.parametrize("long", [False, True], ids=["argv", "stdin"])
async def test_lone_surrogates_are_sent_as_replacement_characters(fake: Fake, long: bool) -> None:
    # os.listdir() of a file named b"bad\xff name"; "\ud83d" is half a UTF-16 pair.
    result = ToolMessage("c1", "bad\udcff name" + " " * (150_000 if long else 0))
    call = AssistantMessage(None, (ToolCall("c1", "ls", "{}"),))
    messages = (SystemMessage("sys \ud83d"), UserMessage("ls"), call, result)
    with anyio.fail_after(GUARD):
        response = await fake.llm().complete(req(*messages))
    record = fake.records()[-1]
    prompt = record["stdin"] if long else record["argv"][1]
    assert "bad\ufffd name" in prompt
    assert record["argv"][record["argv"].index("--system-prompt") + 1] == "sys \ufffd"
    assert "bad\ufffd name" in response.text


async def test_a_reply_cut_inside_a_character_has_a_replacement_character(fake: Fake) -> None:
    with anyio.fail_after(GUARD):
        response = await fake.llm("cut").complete(req(UserMessage("hi")))
    assert response.text == "reply to: hi \ufffd"


async def test_images_and_history_render_as_text(fake: Fake) -> None:
    content = (Text("look: "), ImgUrl("https://example.com/a.png"))
    call = AssistantMessage(None, (ToolCall("c9", "lookup", "{}"),))
    messages = (UserMessage(content), call, ToolMessage("c9", "found"), UserMessage("so?"))
    with anyio.fail_after(GUARD):
        await fake.llm().complete(req(*messages))
    assert fake.argv()[1] == (
        "<user>\nlook: [image: https://example.com/a.png]\n</user>\n\n"
        '<assistant>\n<tool_call name="lookup" id="c9">{}</tool_call>\n</assistant>\n\n'
        '<tool_result name="lookup" id="c9">\nfound\n</tool_result>\n\n<user>\nso?\n</user>'
    )


async def test_usage_is_estimated_without_a_report(fake: Fake) -> None:
    with anyio.fail_after(GUARD):
        response = await fake.llm("no_usage").complete(req(UserMessage("hello there")))
    assert response.usage.estimated
    assert response.usage.prompt_tokens > 0
    assert response.usage.completion_tokens > 0


async def test_stream_is_one_delta_then_finish(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        events = [e async for e in llm.stream(req(UserMessage("hi")))]
    assert [type(e) for e in events] == [TextDelta, FinishEvent]
    assert isinstance(events[0], TextDelta)
    assert events[0].text == "reply to: hi"
    caps = llm.capabilities
    assert (caps.native_tools, caps.stateful_session, caps.streaming, caps.json_schema) == (
        False,
        True,
        False,
        False,
    )


async def test_error_exit_is_a_provider_error_without_secrets(fake: Fake) -> None:
    llm = fake.llm("fail")
    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as caught:
        await llm.complete(req(UserMessage("hi")))
    error = caught.value
    assert type(error) is ProviderError
    assert "exit status 1" in str(error)
    assert "invalid API key" in error.body_excerpt
    assert "abcdefghijklmnopqrstuvwxyz" not in str(error)
    assert error.provider == "claude-code"
    assert not error.retryable
    assert llm.session_id is None


async def test_is_error_result(fake: Fake) -> None:
    with anyio.fail_after(GUARD), pytest.raises(ProviderError) as caught:
        await fake.llm("is_error").complete(req(UserMessage("hi")))
    assert "error_during_execution: API Error: 529 overloaded" in str(caught.value)
    assert caught.value.retryable  # overloaded: another try (or interface) may succeed


async def test_output_that_is_not_json(fake: Fake) -> None:
    with anyio.fail_after(GUARD), pytest.raises(ProviderError, match="not a JSON result"):
        await fake.llm("garbage").complete(req(UserMessage("hi")))


async def test_a_failed_call_drops_the_session(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        reply = await llm.complete(req(UserMessage("hi")))
        llm.env["FAKE_CLAUDE_MODE"] = "fail"
        with pytest.raises(ProviderError):
            await llm.complete(req(UserMessage("hi"), reply.message, UserMessage("a")))
        llm.env["FAKE_CLAUDE_MODE"] = "ok"
        await llm.complete(req(UserMessage("hi"), reply.message, UserMessage("a")))
    assert "--resume" not in fake.argv()


async def test_missing_executable_is_a_config_error(tmp_path: Path) -> None:
    llm = ClaudeCodeCLI(executable=tmp_path / "no-such-claude")
    with pytest.raises(ConfigError, match="no-such-claude"):
        await llm.complete(req(UserMessage("hi")))


async def test_timeout_kills_the_process_group(fake: Fake) -> None:
    llm = fake.llm("sleep", timeout=60)
    with anyio.fail_after(GUARD), pytest.raises(ProviderTimeoutError):
        await llm.complete(req(UserMessage("hi"), timeout=2.0))
    # On a very slow machine the fake may be killed before it logs: the orphan check remains.
    pids = [pid for r in fake.records() for pid in (r["pid"], *r["children"])]
    assert await _gone(pids)
    assert llm.session_id is None


async def test_cancellation_kills_the_process_group(fake: Fake) -> None:
    llm = fake.llm("sleep")

    async def cancel_once_started(scope: anyio.CancelScope) -> None:
        while not fake.records():  # noqa: ASYNC110 - the fake's log has no event to await
            await anyio.sleep(0.02)
        scope.cancel()

    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_once_started, group.cancel_scope)
            await llm.complete(req(UserMessage("hi")))
            pytest.fail("the call should have been cancelled")
    record = fake.records()[-1]
    assert await _gone([record["pid"], *record["children"]])


async def test_descendants_holding_stdout_are_killed(fake: Fake) -> None:
    with anyio.fail_after(GUARD):
        response = await fake.llm("background").complete(req(UserMessage("hi")))
    assert response.text == "reply to: hi"
    assert await _gone(fake.records()[-1]["children"])


async def test_calls_on_one_instance_run_one_at_a_time(fake: Fake) -> None:
    llm = fake.llm()
    with anyio.fail_after(GUARD):
        async with anyio.create_task_group() as group:
            for n in range(3):
                group.start_soon(llm.complete, req(UserMessage(f"q{n}")))
    assert sorted(r["argv"][1] for r in fake.records()) == ["q0", "q1", "q2"]


async def test_llm_chat_resumes_the_session(fake: Fake) -> None:
    llm = fake.llm()

    @llm_chat(llm)
    async def agent(message: str, history: list[dict[str, Any]]) -> None:
        """You are terse."""

    history: list[dict[str, Any]] = []
    with anyio.fail_after(GUARD):
        for message in ("first", "second"):
            async for _text, updated in agent(message, history=history):
                history = updated
    first, second = fake.argv(0), fake.argv(1)
    assert "--resume" not in first
    assert second[:2] == ["-p", "second"]
    assert second[second.index("--resume") + 1] == llm.session_id
    assert history[-1] == {"role": "assistant", "content": "reply to: second"}
    assert os.environ.get("FAKE_CLAUDE_LOG") is None  # env went to the child only
