"""``simplellmfunc chat CONFIG`` in a real terminal: tmux runs it against MockLLMServer, keys
are sent, the screen is read with ``tmux capture-pane``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from acceptance_support import clean_env
from simplellmfunc.testing import MockLLMServer, Reply

pytest.importorskip("textual", reason="the terminal UI needs the [tui] extra (textual)")
TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
SRC = str(Path(__file__).resolve().parents[1] / "src")
GUARD = 60.0  # seconds: a deadlock guard, never an assertion on speed


def tmux(*args: str) -> str:
    assert TMUX is not None
    return subprocess.run([TMUX, *args], check=True, capture_output=True, text=True).stdout


async def wait_screen(name: str, check: Callable[[str], bool]) -> str:
    deadline = time.monotonic() + GUARD
    while True:
        screen = tmux("capture-pane", "-p", "-t", name)
        if check(screen):
            return screen
        assert time.monotonic() < deadline, f"screen never matched:\n{screen}"
        await anyio.sleep(0.2)


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
        name = f"slf-chat-{tmp_path.name}"
        rc = tmp_path / "rc"
        command = f"{sys.executable} -m simplellmfunc chat {config} --session t1; echo $? > {rc}"
        env_args = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
        tmux("new-session", "-d", "-s", name, "-x", "100", "-y", "30", *env_args, command)
        try:
            await wait_screen(name, lambda s: "Ready" in s)
            tmux("send-keys", "-t", name, "-l", "hello there")
            tmux("send-keys", "-t", name, "Enter")
            screen = await wait_screen(name, lambda s: "turn 1" in s)
            assert "Hello from tmux!" in screen
            assert "hello there" in screen
            tmux("send-keys", "-t", name, "-l", "/exit")
            tmux("send-keys", "-t", name, "Enter")
            deadline = time.monotonic() + GUARD
            while not rc.exists():
                assert time.monotonic() < deadline, "the chat did not exit"
                await anyio.sleep(0.1)
        finally:
            subprocess.run([TMUX, "kill-session", "-t", name], capture_output=True)  # noqa: ASYNC221
        assert rc.read_text().strip() == "0"
        assert (tmp_path / "simplellmfunc" / "chat.db").exists()
