"""A screenshot of the terminal chat (pytest-textual-snapshot): one finished turn with an
expanded tool card, against MockLLMServer. The turn is real; its two measured times (the tool's
duration and the turn's) are fixed before the screen is taken, so the picture is stable.

Update the stored SVG after a deliberate change of the layout with ``--snapshot-update``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")
pytest.importorskip("pytest_textual_snapshot", reason="needs pytest-textual-snapshot")

import re

import anyio
from anyio.from_thread import start_blocking_portal
from textual.widgets import Collapsible, Static

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.chat_ui import ChatApp, chat_app
from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec

GUARD = 30  # seconds: a deadlock guard, never an assertion on speed
SECONDS = re.compile(r"\d+\.\d+ s\b")


@tool
async def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 °C"


@pytest.fixture
def server_url() -> Iterator[str]:
    """A MockLLMServer on an event loop of its own (the snapshot runs the app on another)."""
    replies = [
        Reply.tool_calls(ToolCallSpec("get_weather", {"city": "Paris"}, id="call_1")),
        Reply.text("It is **sunny** in Paris: 21 °C.", chunks=3),
    ]
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(MockLLMServer()) as server,
    ):
        server.script(*replies)
        yield server.url


def test_a_finished_turn_with_a_tool_card(snap_compare: Any, server_url: str) -> None:
    llm = OpenAICompatible("sk-test-123456789", "mock", server_url)

    @llm_chat(llm, toolkit=[get_weather], stream=True, enable_event=True)
    async def agent(message: str, history: list | None = None):  # type: ignore[no-untyped-def]
        """Answer about the weather."""

    app = chat_app(agent, prices=(1.0, 2.0), title="weather chat")

    async def run_turn(pilot: Any) -> None:
        with anyio.fail_after(GUARD):
            while "Ready" not in str(app.query_one("#status", Static).render()):
                await pilot.pause(0.02)
            await pilot.press(*"weather in Paris?", "enter")
            while app.turns < 1:
                await pilot.pause(0.02)
        await llm.aclose()
        _fix_times(app)
        await pilot.pause()

    assert snap_compare(app, run_before=run_turn, terminal_size=(90, 30))


def _fix_times(app: ChatApp) -> None:
    """Fixed measured times on the screen; the tool card opened to show arguments and result;
    the prompt unfocused (its blinking cursor would be drawn or not by chance)."""
    app.set_focus(None)
    for card in app.query(Collapsible):
        card.title = SECONDS.sub("0.25 s", str(card.title))
        card.collapsed = False
    status = app.query_one("#status", Static)
    status.update(SECONDS.sub("1.0 s", str(status.render())))
