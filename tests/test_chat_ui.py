"""The terminal chat front end (Textual) driven with Textual's pilot, against MockLLMServer and
real PyRepl kernels: streamed replies, tool cards with live kernel output, input(), abort,
usage, history saved and resumed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")

from textual.widgets import Collapsible, Markdown, Static  # noqa: E402

from simplellmfunc import OpenAICompatible, PyRepl, llm_chat  # noqa: E402
from simplellmfunc.chat_ui import ChatApp, chat_app  # noqa: E402
from simplellmfunc.runtime import SQLiteStore  # noqa: E402
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec  # noqa: E402

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
INPUT_CODE = "name = input('your name? ')\nprint('hello', name)"
LOOP_CODE = "import time\nfor i in range(400):\n    print('tick', i, flush=True)\n    time.sleep(0.05)"


def brain(request: RecordedRequest) -> Reply:
    """Run a cell for "ask"/"loop"/"calc"; answer anything else (and tool results) in text."""
    last = request.json["messages"][-1]
    codes = {"ask": INPUT_CODE, "loop": LOOP_CODE, "calc": "print(6 * 7)"}
    if last["role"] == "user" and last["content"] in codes:
        return Reply.tool_calls(ToolCallSpec("execute_code", {"code": codes[last["content"]]}))
    return Reply.text(f"**ok**: {str(last['content'])[:60]}", chunks=3)


@pytest.fixture
async def llm(mock_server: MockLLMServer) -> AsyncIterator[OpenAICompatible]:
    mock_server.default = brain
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as model:
        yield model


def make_agent(llm: OpenAICompatible, toolkit: list[Any] | None = None) -> Any:
    @llm_chat(llm, toolkit=toolkit, stream=True, enable_event=True)
    async def agent(message: str, history: list | None = None):
        """Help."""

    return agent


async def until(check: Callable[[], bool], pilot: Any) -> None:
    with anyio.fail_after(GUARD):
        while not check():
            await pilot.pause(0.02)


def screen_text(app: ChatApp) -> str:
    parts = []
    for widget in app.query("#log *"):
        if isinstance(widget, Markdown):
            parts.append(widget.source)
        elif isinstance(widget, Collapsible):
            parts.append(str(widget.title))
        elif isinstance(widget, Static):
            parts.append(str(widget.render()))
    return "\n".join(parts)


async def send(pilot: Any, text: str) -> None:
    await pilot.press(*text)
    await pilot.press("enter")


async def test_a_turn_streams_markdown_and_shows_usage(llm: OpenAICompatible) -> None:
    app = chat_app(make_agent(llm), prices=(1.0, 2.0))
    async with app.run_test() as pilot:
        await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
        await send(pilot, "hi")
        await until(lambda: app.turns == 1, pilot)
        replies = app.query(Markdown)
        assert [r.source for r in replies if "ok" in r.source] == ["**ok**: hi"]
        status = str(app.query_one("#status", Static).render())
        assert "turn 1" in status and "1 LLM call" in status and "$" in status
        assert app.sessions.get("default").history[-1]["content"] == "**ok**: hi"


async def test_multi_line_input(llm: OpenAICompatible) -> None:
    app = chat_app(make_agent(llm))
    async with app.run_test() as pilot:
        await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
        await pilot.press("a", "ctrl+j", "b", "\\", "enter", "c", "enter")
        await until(lambda: app.turns == 1, pilot)
        history = app.sessions.get("default").history
        assert history[-2] == {"role": "user", "content": "a\nb\nc"}
