"""``simplellmfunc repl CFG``: a conversation with a configured agent, turn after turn.

The conversation (history) is kept across turns and the agent's memory across sessions when
its store persists (``memory.store: sqlite``). Lines starting with ``:`` are commands (see
:data:`HELP`). Ctrl-C aborts the running turn (the conversation stays valid); Ctrl-D or
``:quit`` leaves. Line editing and history come from ``readline`` when stdin is a terminal.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

import anyio
from anyio.abc import TaskStatus

from .._abort import AbortSignal
from ..exceptions import SimpleLLMFuncError
from ..runtime import AgentConfig, ConfiguredAgent, load_agent_config
from ..runtime.trace import timeline
from ._args import overrides_from
from ._output import EXIT_OK, Printer, report_error

__all__ = ["HELP", "handle_repl"]

HELP = """commands:
  :trace [n]       the step timeline (the last n steps)
  :memory [clear]  the agent's memory (or forget it)
  :stats           totals of the trace
  :tools           the tools the model sees
  :reload          read the config file again (the conversation is kept)
  :save [text]     save a checkpoint (conversation, memory, trace)
  :load [n]        restore checkpoint n (default: the newest)
  :clear           start a new conversation
  :help            this text
  :quit            leave (Ctrl-D too)"""


def _read_line(prompt: str) -> str | None:
    try:
        return input(prompt)
    except EOFError:
        return None


class Repl:
    """One REPL session (runs in one task, which opens and closes the agent)."""

    def __init__(self, args: argparse.Namespace, config: AgentConfig, printer: Printer) -> None:
        self.args = args
        self.config = config
        self.printer = printer
        self.interactive = sys.stdin.isatty()
        self.agent = ConfiguredAgent(config)
        self.turn_abort: AbortSignal | None = None

    def say(self, text: str) -> None:
        """A line of command output (stdout)."""
        print(text, flush=True)

    async def run(self) -> int:
        """The session; returns the exit status."""
        code = EXIT_OK  # also when SIGTERM ends the session
        async with anyio.create_task_group() as group:
            await group.start(self._watch_signals, group.cancel_scope)
            try:
                code = await self._session()
            finally:
                group.cancel_scope.cancel()
        return code

    async def _watch_signals(
        self, scope: anyio.CancelScope, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for signum in signals:
                if signum == signal.SIGTERM:
                    scope.cancel()
                    return
                if self.turn_abort is not None and not self.turn_abort.aborted:
                    self.turn_abort.abort("interrupted by SIGINT")
                else:
                    print("\n(:quit or Ctrl-D to leave)", file=sys.stderr, flush=True)

    async def _session(self) -> int:
        try:
            await self.agent.open()
        except SimpleLLMFuncError as exc:
            return report_error(exc)
        try:
            if self.interactive:
                self.say(f"{self.config.name}: {self.config.kind} agent. :help for commands.")
            prompt = "> " if self.interactive else ""
            while True:
                line = await anyio.to_thread.run_sync(_read_line, prompt, abandon_on_cancel=True)
                if line is None:
                    break
                line = line.strip()
                if not line:
                    continue
                if line.startswith(":"):
                    if not await self._command(line):
                        break
                else:
                    await self._turn(line)
        finally:
            await self.agent.aclose()
        return EXIT_OK

    async def _turn(self, text: str) -> None:
        self.turn_abort = AbortSignal()
        try:
            turn = await self.agent.run(text, abort=self.turn_abort, observer=self.printer)
        except SimpleLLMFuncError as exc:
            report_error(exc)
            return
        finally:
            self.turn_abort = None
        self.printer.finish(turn.text)
        if turn.aborted:
            print("(turn aborted)", file=sys.stderr, flush=True)
        elif self.agent.config.trace.timeline:
            records = self.agent.recorder.records[-20:]
            print(timeline(records, result=False), file=sys.stderr, flush=True)

    # -- commands ----------------------------------------------------------------------------

    async def _command(self, line: str) -> bool:
        """Run a ``:command``; return whether the session goes on."""
        name, _, rest = line[1:].partition(" ")
        rest = rest.strip()
        if name in ("quit", "exit", "q"):
            return False
        handler = {
            "trace": self._trace,
            "memory": self._memory,
            "stats": self._stats,
            "tools": self._tools,
            "reload": self._reload,
            "save": self._save,
            "load": self._load,
            "clear": self._clear,
            "help": self._help,
        }.get(name)
        if handler is None:
            self.say(f"unknown command :{name} (:help lists them)")
            return True
        try:
            await handler(rest)
        except SimpleLLMFuncError as exc:
            report_error(exc)
        except ValueError:
            self.say(f"bad argument {rest!r} for :{name}")
        return True

    async def _help(self, rest: str) -> None:
        self.say(HELP)

    async def _trace(self, rest: str) -> None:
        records = self.agent.recorder.records
        if rest:
            records = records[-int(rest) :]
        self.say(timeline(records) if records else "(no steps yet)")

    async def _stats(self, rest: str) -> None:
        stats = self.agent.recorder.stats().to_dict()
        self.say("\n".join(f"{key}: {value}" for key, value in stats.items()))

    async def _tools(self, rest: str) -> None:
        names = await self.agent.tool_names()
        self.say("\n".join(names) if names else "(no tools)")

    async def _memory(self, rest: str) -> None:
        memory = self.agent.memory
        if memory is None:
            self.say("memory is off (memory.store: none)")
        elif rest == "clear":
            self.say(f"forgot {await memory.clear()} items")
        else:
            items = await memory.items()
            lines = [f"[{i.key}] {_value(i.value)}" for i in items]
            self.say("\n".join(lines) if lines else "(memory is empty)")

    async def _save(self, rest: str) -> None:
        info = await self.agent.save_checkpoint(rest)
        self.say(f"saved checkpoint {info.number} ({info.path})")

    async def _load(self, rest: str) -> None:
        checkpoint = await self.agent.load_checkpoint(int(rest) if rest else None)
        label = f": {checkpoint.description}" if checkpoint.description else ""
        self.say(f"loaded checkpoint{label} ({len(checkpoint.history)} messages)")

    async def _clear(self, rest: str) -> None:
        self.agent.history = []
        self.say("new conversation")

    async def _reload(self, rest: str) -> None:
        config = load_agent_config(self.args.config, overrides=overrides_from(self.args))
        history, records = self.agent.history, self.agent.recorder.records
        await self.agent.aclose()
        self.agent = ConfiguredAgent(config, history=history)
        try:
            await self.agent.open()
        except SimpleLLMFuncError:
            self.agent = ConfiguredAgent(self.config, history=history)
            await self.agent.open()  # back to the config that worked
            self.agent.recorder.load(records)
            raise
        self.agent.recorder.load(records)  # one trace across reloads
        self.config = config
        self.say(f"reloaded {self.args.config}")


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def handle_repl(args: argparse.Namespace) -> int:
    """Run the REPL on ``args.config``; return the exit status."""
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401 - line editing and history for input()
        except ImportError:
            pass
    stream = args.stream if args.stream is not None else sys.stdout.isatty()
    printer = Printer(stream=stream, quiet=args.quiet)
    code: int = anyio.run(Repl(args, config, printer).run)
    return code
