"""A command in a real terminal: a private tmux server runs it, keys are sent, the screen is read.

Used to test terminal front ends (``simplellmfunc chat``, ``@tui()`` scripts) as a user sees
them. Blocking calls: from async code, run the waits in a worker thread
(``anyio.to_thread.run_sync``) so the event loop (and a :class:`MockLLMServer` on it) keeps
running.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["TmuxTerminal", "tmux_available"]

_POLL_S = 0.1
# remain-on-exit keeps the pane (and what the command printed last) after it ends.
_CONFIG = "set -g remain-on-exit on\nset -g history-limit 5000\nset -g status off\n"


def tmux_available() -> bool:
    """Whether a ``tmux`` executable is on ``PATH``."""
    return shutil.which("tmux") is not None


class TmuxTerminal:
    """``command`` in a detached terminal of ``width`` x ``height`` on a tmux server of its own.

    Args:
        command: The program and its arguments (or one shell command line).
        env: The command's whole environment (also the private tmux server's).
        cwd: Its working directory.
        width: Columns.
        height: Lines.

    Example:
        >>> with TmuxTerminal(["python", "-m", "simplellmfunc", "chat", "agent.yml"],
        ...                   env=env) as term:  # doctest: +SKIP
        ...     term.wait_for("Ready")
        ...     term.type("hello")
        ...     term.press("Enter")
        ...     term.wait_for("turn 1")
        ...     term.type("/exit"); term.press("Enter")
        ...     assert term.wait_exit() == 0
    """

    def __init__(
        self,
        command: Sequence[str] | str,
        *,
        env: Mapping[str, str],
        cwd: str | Path | None = None,
        width: int = 100,
        height: int = 30,
    ) -> None:
        tmux = shutil.which("tmux")
        if tmux is None:
            raise FileNotFoundError("tmux is not installed")
        self._tmux = tmux
        self.command = command if isinstance(command, str) else shlex.join(command)
        self.env = dict(env)
        self.cwd = str(cwd) if cwd is not None else None
        self.size = (width, height)
        self._dir = Path(tempfile.mkdtemp(prefix="slf-tmux-"))
        self._socket = f"slf-{uuid.uuid4().hex[:12]}"
        self._rc = self._dir / "rc"
        self._started = False

    def _run(self, *args: str) -> str:
        argv = [self._tmux, "-L", self._socket, "-f", str(self._dir / "tmux.conf"), *args]
        done = subprocess.run(argv, check=True, capture_output=True, text=True, env=self.env)
        return done.stdout

    def start(self) -> None:
        """Start the command (``with`` does it)."""
        (self._dir / "tmux.conf").write_text(_CONFIG, encoding="utf-8")
        line = f"{self.command}; echo $? > {shlex.quote(str(self._rc))}"
        width, height = self.size
        where = ["-c", self.cwd] if self.cwd else []
        size = ["-x", str(width), "-y", str(height)]
        self._run("new-session", "-d", "-s", "main", *size, *where, line)
        self._started = True

    def close(self) -> None:
        """End the command (if still running) and the tmux server; remove the temporary files."""
        if self._started:
            subprocess.run(
                [self._tmux, "-L", self._socket, "kill-server"], capture_output=True, env=self.env
            )
            self._started = False
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> TmuxTerminal:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def screen(self, *, history: bool = False) -> str:
        """The visible screen (with ``history``: the scrollback too)."""
        extra = ["-S", "-"] if history else []
        return self._run("capture-pane", "-p", "-t", "main", *extra)

    def type(self, text: str) -> None:
        """Type ``text`` literally."""
        self._run("send-keys", "-t", "main", "-l", text)

    def press(self, *keys: str) -> None:
        """Press keys by tmux name (``Enter``, ``Escape``, ``C-q`` ...)."""
        self._run("send-keys", "-t", "main", *keys)

    def send_line(self, text: str) -> None:
        """Type ``text`` and press Enter."""
        self.type(text)
        self.press("Enter")

    def wait_for(self, check: str | Callable[[str], bool], timeout: float = 60.0) -> str:
        """The screen once it contains ``check`` (or ``check(screen)`` holds).

        Raises:
            TimeoutError: After ``timeout`` seconds, with the last screen.
        """
        test = (lambda screen: check in screen) if isinstance(check, str) else check
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if test(screen):
                return screen
            if time.monotonic() > deadline:
                raise TimeoutError(f"the screen never matched {check!r}:\n{screen}")
            time.sleep(_POLL_S)

    @property
    def exit_code(self) -> int | None:
        """The command's exit status once it ended (``None`` while it runs)."""
        try:
            text = self._rc.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return int(text) if text else None

    def wait_exit(self, timeout: float = 60.0) -> int:
        """Wait for the command to end; its exit status.

        Raises:
            TimeoutError: After ``timeout`` seconds, with the last screen.
        """
        deadline = time.monotonic() + timeout
        while (code := self.exit_code) is None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the command did not exit:\n{self.screen()}")
            time.sleep(_POLL_S)
        return code
