"""What the command line prints while an agent runs, and its exit codes.

stdout carries the answer only (so ``simplellmfunc run worker.yml --quiet -`` can be another
agent's tool); progress (tool calls, retries, chain stages), errors and the trace go to stderr.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from .._events import (
    EventYield,
    LLMCallErrorEvent,
    LLMCallStartEvent,
    LLMChunkArriveEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ..exceptions import (
    AbortedError,
    BridgeError,
    KernelError,
    MCPError,
    ProviderError,
    SimpleLLMFuncError,
    ToolExecutionError,
    UserError,
    WorkspaceError,
)
from ..runtime import RunObserver

__all__ = [
    "EXIT_ABORTED",
    "EXIT_CONFIG",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_PROVIDER",
    "EXIT_TOOL",
    "Printer",
    "exit_code",
    "report_error",
]

EXIT_OK = 0
EXIT_ERROR = 1  # a run failed for another reason
EXIT_CONFIG = 2  # bad config or command line (argparse uses 2 as well)
EXIT_PROVIDER = 3  # the model API failed after retries
EXIT_TOOL = 4  # a tool could not be started or used (MCP server, kernel, workspace)
EXIT_ABORTED = 130  # Ctrl-C: 128 + SIGINT, as shells report it

_TOOL_ERRORS = (MCPError, KernelError, BridgeError, ToolExecutionError, WorkspaceError)
_PREVIEW = 120


def exit_code(error: BaseException) -> int:
    """The exit status for a failure."""
    if isinstance(error, UserError):
        return EXIT_CONFIG
    if isinstance(error, ProviderError):
        return EXIT_PROVIDER
    if isinstance(error, _TOOL_ERRORS):
        return EXIT_TOOL
    if isinstance(error, AbortedError | KeyboardInterrupt):
        return EXIT_ABORTED
    return EXIT_ERROR


_LABELS = {
    EXIT_CONFIG: "config error",
    EXIT_PROVIDER: "provider failure",
    EXIT_TOOL: "tool failure",
    EXIT_ABORTED: "aborted",
    EXIT_ERROR: "run failed",
}


def report_error(error: SimpleLLMFuncError, *, as_json: bool = False) -> int:
    """Print ``error`` (no traceback) and return its exit status."""
    code = exit_code(error)
    label = _LABELS[code]
    text = str(error) or type(error).__name__
    if as_json:
        payload = {"error": {"kind": label, "type": type(error).__name__, "message": text}}
        print(json.dumps(payload, ensure_ascii=False), flush=True)
    print(f"error: {label}: {text}", file=sys.stderr, flush=True)
    return code


def _short(text: str, limit: int = _PREVIEW) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Printer(RunObserver):
    """Streams answer text to stdout and shows progress on stderr.

    Args:
        stream: Print text deltas as they arrive (else the caller prints the answer at the end).
        quiet: No progress on stderr.
        out: Where the answer goes.
        err: Where progress goes.
    """

    def __init__(
        self, *, stream: bool, quiet: bool, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        self.stream = stream
        self.quiet = quiet
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.streamed = ""  # text streamed by the current LLM call
        self._final_stage = True

    def progress(self, text: str) -> None:
        """One progress line on stderr (unless quiet)."""
        if not self.quiet:
            print(text, file=self.err, flush=True)

    async def stage(self, index: int, total: int, name: str) -> None:
        """Announce a chain stage; only the last stage streams to stdout."""
        self._final_stage = index == total - 1
        self.progress(f"== stage {index + 1}/{total}: {name}")

    async def event(self, item: EventYield) -> None:
        """Print what the event says."""
        event = item.event
        if item.origin.fork_id is not None:
            return  # sub-agents' own events: their tool calls show in the parent's
        if isinstance(event, LLMCallStartEvent):
            self._close_line()
        elif isinstance(event, LLMChunkArriveEvent) and event.text:
            if self.stream and self._final_stage:
                self.out.write(event.text)
                self.out.flush()
                self.streamed += event.text
        elif isinstance(event, ToolCallStartEvent):
            self._close_line()
            arguments = json.dumps(dict(event.arguments), ensure_ascii=False)
            self.progress(f"→ {event.tool_name}({_short(arguments, 80)})")
        elif isinstance(event, ToolCallEndEvent):
            mark = "←" if event.success else "✗"
            took = f"{event.duration_s:.2f}s"
            self.progress(f"{mark} {event.tool_name} ({took}): {_short(event.result)}")
        elif isinstance(event, LLMCallErrorEvent):
            self.progress(f"! model call failed: {_short(event.message)}")

    def _close_line(self) -> None:
        """End the line of text streamed by the previous call (a thought before tool calls)."""
        if self.streamed and not self.streamed.endswith("\n"):
            self.out.write("\n")
            self.out.flush()
        self.streamed = ""

    def finish(self, answer: str) -> None:
        """Print the answer: only a line end when it was streamed already, else all of it."""
        if self.streamed and answer.strip() == self.streamed.strip():
            self._close_line()
            return
        self._close_line()
        self.out.write(answer.rstrip("\n") + "\n")
        self.out.flush()


def dumps(data: Any) -> str:
    """JSON for the terminal (non-ASCII kept)."""
    return json.dumps(data, ensure_ascii=False, indent=2)
