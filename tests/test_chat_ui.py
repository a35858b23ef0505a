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

from textual.widgets import Collapsible, Markdown, Static

from simplellmfunc import OpenAICompatible, PyRepl, llm_chat, tool
from simplellmfunc.chat_ui import ChatApp, chat_app
from simplellmfunc.runtime import SQLiteStore
from simplellmfunc.testing import MockLLMServer, RecordedRequest, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
INPUT_CODE = "name = input('your name? ')\nprint('hello', name)"
LOOP_CODE = (
    "import time\nfor i in range(400):\n    print('tick', i, flush=True)\n    time.sleep(0.05)"
)

DRAW_CODE = (
    "from PIL import Image as Picture\nimport io\nfrom IPython.display import Image, display\n"
    "buffer = io.BytesIO()\nPicture.new('RGB', (48, 24), (200, 0, 0)).save(buffer, 'PNG')\n"
    "display(Image(data=buffer.getvalue()))"
)


def brain(request: RecordedRequest) -> Reply:
    """Run a cell for "ask"/"loop"/"calc"; answer anything else (and tool results) in text."""
    last = request.json["messages"][-1]
    codes = {"ask": INPUT_CODE, "loop": LOOP_CODE, "calc": "print(6 * 7)", "draw": DRAW_CODE}
    codes["fail"] = "len(5)"
    codes["write"] = "open('note.txt', 'w').write('hi')\nprint('wrote')"
    if last["role"] == "user" and isinstance(last["content"], str) and last["content"] in codes:
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
        assert "turn 1" in status
        assert "1 LLM call" in status
        assert "$" in status
        assert app.sessions.get("default").history[-1]["content"] == "**ok**: hi"


async def test_multi_line_input(llm: OpenAICompatible) -> None:
    app = chat_app(make_agent(llm))
    async with app.run_test() as pilot:
        await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
        await pilot.press("a", "ctrl+j", "b", "\\", "enter", "c", "enter")
        await until(lambda: app.turns == 1, pilot)
        history = app.sessions.get("default").history
        assert history[-2] == {"role": "user", "content": "a\nb\nc"}


async def test_tool_card_streams_kernel_output_and_answers_input(llm: OpenAICompatible) -> None:
    """A PyRepl cell's card shows its arguments and output; its input() is answered from the
    prompt; the card ends with its result and duration."""
    async with PyRepl() as repl:
        app = chat_app(make_agent(llm, [*repl.toolset]))
        async with app.run_test() as pilot:
            await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
            await send(pilot, "ask")
            await until(
                lambda: app.view is not None and app.view.pending_input() is not None, pilot
            )
            assert "your name?" in str(app.query_one("#status", Static).render())
            await send(pilot, "Ada")
            await until(lambda: app.turns == 1, pilot)
            assert app.view is not None
            (card,) = app.view.cards.values()
            assert card.tool_name == "execute_code"
            assert card.status == "success"
            assert "hello Ada" in card.output
            assert card.duration_s is not None
            assert "execute_code (success)" in screen_text(app)


async def test_a_cell_that_raised_is_a_failed_card(llm: OpenAICompatible) -> None:
    """The card of a cell that raised says so, with the exception line once."""
    async with PyRepl() as repl:
        app = chat_app(make_agent(llm, [*repl.toolset]))
        async with app.run_test() as pilot:
            await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
            await send(pilot, "fail")
            await until(lambda: app.turns == 1, pilot)
            assert app.view is not None
            (card,) = app.view.cards.values()
            assert card.status == "error"
            assert card.output == "TypeError: object of type 'int' has no len()\n"
            text = screen_text(app)
            assert "execute_code (error)" in text
            assert "(success)" not in text


async def test_escape_aborts_the_turn_and_keeps_a_valid_history(llm: OpenAICompatible) -> None:
    async with PyRepl() as repl:
        app = chat_app(make_agent(llm, [*repl.toolset]))
        async with app.run_test() as pilot:
            await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
            await send(pilot, "loop")
            await until(lambda: app.view is not None and "tick 2" in _output(app), pilot)
            await pilot.press("escape")
            await until(lambda: app.turns == 1, pilot)
            assert app.view is not None
            assert app.view.aborted
            assert "aborted" in str(app.query_one("#status", Static).render())
            history = app.sessions.get("default").history
            assert [m["role"] for m in history if m["role"] != "system"] == [
                "user",
                "assistant",
                "tool",
            ]
            await send(pilot, "again")
            await until(lambda: app.turns == 2, pilot)
            assert app.sessions.get("default").history[-1]["content"] == "**ok**: again"


def _output(app: ChatApp) -> str:
    assert app.view is not None
    return "".join(card.output for card in app.view.cards.values())


async def test_history_is_saved_and_resumed(
    llm: OpenAICompatible, mock_server: MockLLMServer, tmp_path: Path
) -> None:
    for turn in ("first", "second"):
        store = SQLiteStore(tmp_path / "chat.db")
        app = chat_app(make_agent(llm), session="work", store=store)
        async with app.run_test() as pilot:
            await until(
                lambda a=app: "Ready" in str(a.query_one("#status", Static).render()), pilot
            )
            shown = screen_text(app)
            await send(pilot, turn)
            await until(lambda a=app: a.turns == 1, pilot)
        await store.aclose()
    assert "(resumed: 3 messages)" in shown
    sent = [m["content"] for m in mock_server.requests[-1].json["messages"][1:]]
    assert sent == ["first", "**ok**: first", "second"]


def _delegating(request: RecordedRequest) -> Reply:
    """The parent hands "delegate" to its helper agent (a tool); the helper adds with a tool of
    its own and answers; each then answers with what it read."""
    messages = request.json["messages"]
    helper = "You add numbers." in str(messages[0]["content"])
    last = messages[-1]
    if last["role"] == "tool":
        return Reply.text(f"{'helper' if helper else 'parent'} read {last['content']}")
    if helper:
        return Reply.tool_calls(ToolCallSpec("add", {"a": 2, "b": 3}, id="inner-add"))
    if last["content"] == "delegate":
        return Reply.tool_calls(ToolCallSpec("helper", {"task": "add 2 and 3"}, id="outer"))
    return Reply.text("plain")


async def test_a_sub_run_is_drawn_inside_the_card_that_started_it(
    mock_server: MockLLMServer,
) -> None:
    """An agent used as a tool: its reply and its own tool call show inside the card of the
    call that started it, not as cards and replies of the turn."""
    from rich.console import Console

    from simplellmfunc.chat_ui._widgets import ToolCard

    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    mock_server.default = _delegating
    async with OpenAICompatible("sk-test-123456789", "mock", mock_server.url) as model:

        @llm_chat(model, toolkit=[add], stream=True)
        async def helper(message: str, history: list | None = None):
            """You add numbers."""

        app = chat_app(make_agent(model, [helper.as_tool("helper", "Adds numbers.")]))
        async with app.run_test(size=(100, 40)) as pilot:
            await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
            await send(pilot, "delegate")
            await until(lambda: app.turns == 1, pilot)
            assert app.view is not None
            (outer,) = app.view.cards.values()  # the helper's add is not a card of the turn
            assert outer.tool_call_id == "outer"
            (sub,) = outer.forks.values()
            assert sub.label == "helper"
            assert [c.tool_call_id for c in sub.cards.values()] == ["inner-add"]
            (widget,) = app.query(ToolCard)
            console = Console(record=True, width=100)
            console.print(widget.render_card(outer))
            drawn = console.export_text()
            shown = screen_text(app)
    assert "⑂ helper" in drawn
    assert "✓ add (success)" in drawn
    assert "helper read 5" in drawn
    assert "→ helper read 5" in drawn  # the call's result, below its sub-run
    assert "parent read helper read 5" in shown
    assert "helper (success)" in shown


@pytest.mark.parametrize("images", [True, False])
async def test_a_kernel_image_is_drawn_in_its_card(llm: OpenAICompatible, images: bool) -> None:
    """With textual-image (the tui-images extra) an image is drawn as half-block cells in its
    colours; without it (or images=False) a line says its type and size."""
    from rich.console import Console

    from simplellmfunc.chat_ui._widgets import ToolCard

    if images:
        pytest.importorskip("textual_image", reason="the tui-images extra is not installed")
    async with PyRepl() as repl:
        app = chat_app(make_agent(llm, [*repl.toolset]), images=images)
        async with app.run_test(size=(100, 40)) as pilot:
            await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
            await send(pilot, "draw")
            await until(lambda: app.turns == 1, pilot)
            assert app.view is not None
            (card,) = app.view.cards.values()
            assert [mime for mime, _ in card.images] == ["image/png"]
            (widget,) = app.query(ToolCard)
            console = Console(record=True, width=100, color_system="truecolor")
            console.print(widget.render_card(card))
            drawn, styled = console.export_text(clear=False), console.export_text(styles=True)
    assert "[image image/png, " in drawn
    if images:
        assert "▀" * 12 in drawn  # 48 pixels wide: 12 cells
        assert "38;2;200;0;0" in styled  # in its own colour
    else:
        assert "▀" not in drawn


async def test_approval_is_answered_from_the_prompt(llm: OpenAICompatible) -> None:
    """A cell that writes a file waits on its card; the prompt answers it: a bad answer is
    refused on the card, ``n <reason>`` denies (the model reads the reason), ``y`` approves."""
    from simplellmfunc.builtin import code_touches_system

    app = chat_app(make_agent(llm), pyrepl={"requires_approval": code_touches_system})
    async with app.run_test() as pilot:
        await until(lambda: "Ready" in str(app.query_one("#status", Static).render()), pilot)
        for answer, outcome in (("n not now", "[denied: not now]"), ("y", "[approved]")):
            await send(pilot, "write")
            await until(
                lambda: app.view is not None and app.view.pending_input() is not None, pilot
            )
            assert "needs approval" in str(app.query_one("#status", Static).render())
            assert app.view is not None
            (card,) = app.view.cards.values()
            assert card.status == "waiting-approval"
            await send(pilot, "maybe")
            await until(lambda c=card: "answer the approval with" in c.output, pilot)
            await send(pilot, answer)
            await until(lambda: not app.busy, pilot)
            assert outcome in card.output
        assert card.status == "success"
        assert "wrote" in card.output
        history = app.sessions.get("default").history
    tools = [m["content"] for m in history if m["role"] == "tool"]
    assert "not now" in tools[0]
