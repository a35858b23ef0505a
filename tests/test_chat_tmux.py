"""``simplellmfunc chat CONFIG`` in a real terminal: tmux runs it against MockLLMServer, keys
are sent, the screen is read (:class:`~simplellmfunc.testing.TmuxTerminal`)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from acceptance_support import clean_env
from simplellmfunc.testing import MockLLMServer, Reply, TmuxTerminal, tmux_available

pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")
pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
SRC = str(Path(__file__).resolve().parents[1] / "src")
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
