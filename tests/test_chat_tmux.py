"""``simplellmfunc chat CONFIG`` in a real terminal: tmux runs it against MockLLMServer, keys
are sent, the screen is read (:class:`~simplellmfunc.testing.TmuxTerminal`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest

from acceptance_support import clean_env
from simplellmfunc.testing import MockLLMServer, Reply, TmuxTerminal, ToolCallSpec, tmux_available

pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")
pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
REPO = Path(__file__).resolve().parents[1]
SRC = str(REPO / "src")
ARTIFACTS = Path(os.environ.get("TEST_ARTIFACTS") or REPO / ".cache" / "test-artifacts")
GUARD = 60.0  # seconds: a deadlock guard, never an assertion on speed


def _talk(term: TmuxTerminal) -> tuple[str, int]:
    """Say hello, read the answer, leave with /exit; (the screen with the answer, exit status)."""
    term.wait_for("Ready", GUARD)
    term.send_line("hello there")
    screen = term.wait_for("turn 1", GUARD)
    term.send_line("/exit")
    return screen, term.wait_exit(GUARD)


async def test_chat_in_tmux(tmp_path: Path) -> None:
    async with MockLLMServer(default=Reply.text("Hello from **tmux**!", chunks=3)) as server:
        config = tmp_path / "agent.yml"
        config.write_text("kind: simple\nmodel: openai:mock-model\nsystem: Be brief.\n")
        env = clean_env(
            {
                "OPENAI_API_KEY": "sk-test-123456789",
                "OPENAI_BASE_URL": server.url,
                "PYTHONPATH": SRC,
                "TERM": "xterm-256color",
                "XDG_STATE_HOME": str(tmp_path),
            }
        )
        command = [sys.executable, "-m", "simplellmfunc", "chat", str(config), "--session", "t1"]
        with TmuxTerminal(command, env=env, cwd=tmp_path) as term:
            screen, code = await anyio.to_thread.run_sync(_talk, term)
    assert "Hello from tmux!" in screen
    assert "hello there" in screen
    assert code == 0
    assert (tmp_path / "simplellmfunc" / "chat.db").exists()


APPROVAL_APP = '''
import os

from simplellmfunc import OpenAICompatible, llm_chat, tool
from simplellmfunc.chat_ui import chat_app


@tool(requires_approval=True)
async def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    os.remove(path)
    return f"deleted {path}"


llm = OpenAICompatible(os.environ["OPENAI_API_KEY"], "mock-model", os.environ["OPENAI_BASE_URL"])


@llm_chat(llm, toolkit=[delete_file], stream=True, enable_event=True)
async def agent(message: str, history: list | None = None):
    """You tidy up files."""


chat_app(agent, session="t2", images=False).run()
'''


def _approve(term: TmuxTerminal) -> tuple[str, str, int]:
    """Ask for a deletion, wait for the card, press y + Enter; (waiting screen, answer, exit)."""
    term.wait_for("Ready", GUARD)
    term.send_line("remove junk.txt")
    waiting = term.wait_for("needs approval", GUARD)
    term.type("y")
    term.press("Enter")
    answered = term.wait_for("turn 1", GUARD)
    term.send_line("/exit")
    return waiting, answered, term.wait_exit(GUARD)


async def test_approval_in_tmux(tmp_path: Path) -> None:
    """The terminal chat in a real terminal: a tool call that needs approval waits on its card
    (⚠, the reason, what to type); pressing y and Enter approves it, the tool runs (the file is
    gone) and the model's answer shows. The waiting screen is kept for the docs."""
    junk = tmp_path / "junk.txt"
    junk.write_text("old", encoding="utf-8")
    app = tmp_path / "approval_app.py"
    app.write_text(APPROVAL_APP, encoding="utf-8")
    async with MockLLMServer() as server:
        server.script(
            Reply.tool_calls(ToolCallSpec("delete_file", {"path": str(junk)}, id="c1")),
            Reply.text("Deleted **junk.txt**."),
        )
        env = clean_env(
            {
                "OPENAI_API_KEY": "sk-test-123456789",
                "OPENAI_BASE_URL": server.url,
                "PYTHONPATH": SRC,
                "TERM": "xterm-256color",
            }
        )
        with TmuxTerminal([sys.executable, str(app)], env=env, cwd=tmp_path) as term:
            waiting, answered, code = await anyio.to_thread.run_sync(_approve, term)
    assert "⚠" in waiting
    assert "delete_file needs approval" in waiting
    assert junk.exists() is False  # the tool ran after the y
    assert "Deleted junk.txt." in answered
    assert "✓ delete_file (success)" in answered  # the card, folded once it ran
    assert code == 0
    _keep("tui-approval.txt", waiting)


def _keep(name: str, text: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / name).write_text(text, encoding="utf-8")
