"""``simplellmfunc run CFG INPUT|-``: one run of a configured agent.

The answer streams to stdout (when stdout is a terminal, or with ``--stream``); tool calls and
progress go to stderr. The first Ctrl-C (SIGINT, or SIGTERM) aborts the run through its
:class:`AbortSignal`: in-flight model calls and tools stop, the partial trace is printed and
the exit status is 130. A second one stops at once.
"""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import dataclass

import anyio
from anyio.abc import TaskStatus

from .._abort import AbortSignal
from ..exceptions import SimpleLLMFuncError
from ..runtime import (
    AgentConfig,
    ConfigRunResult,
    ConfiguredAgent,
    TurnResult,
    load_agent_config,
)
from ..runtime.trace import timeline
from ._args import overrides_from
from ._output import EXIT_ABORTED, EXIT_OK, Printer, dumps, report_error

__all__ = ["SignalWatch", "handle_run", "watch_signals"]


@dataclass(slots=True)
class SignalWatch:
    """What the signal handler did: ``abort`` is the run's signal; ``hard`` after a second one."""

    abort: AbortSignal
    hard: bool = False
    quiet: bool = False


async def watch_signals(
    watch: SignalWatch,
    scope: anyio.CancelScope,
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """First SIGINT / SIGTERM: abort the run; the next one: cancel ``scope``."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            if not watch.abort.aborted:
                watch.abort.abort(f"interrupted by {signal.Signals(signum).name}")
                if not watch.quiet:
                    print("\n^C aborting (again to stop at once)", file=sys.stderr, flush=True)
                continue
            watch.hard = True
            scope.cancel()
            return


def handle_run(args: argparse.Namespace) -> int:
    """Run ``args.config`` on ``args.input``; return the exit status."""
    as_json = args.format == "json"
    text = sys.stdin.read() if args.input == "-" else args.input
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
    except SimpleLLMFuncError as exc:
        return report_error(exc, as_json=as_json)
    stream = args.stream if args.stream is not None else (not as_json and sys.stdout.isatty())
    printer = Printer(stream=stream and not as_json, quiet=args.quiet)
    return anyio.run(_run, config, text, printer, as_json)


async def _run(config: AgentConfig, text: str, printer: Printer, as_json: bool) -> int:
    watch = SignalWatch(AbortSignal(), quiet=printer.quiet)
    code = EXIT_ABORTED
    async with anyio.create_task_group() as group:
        await group.start(watch_signals, watch, group.cancel_scope)
        agent = ConfiguredAgent(config)
        try:
            code = await _run_agent(agent, text, watch.abort, printer, as_json)
        finally:
            group.cancel_scope.cancel()
            if watch.hard:
                _print_trace(agent)
    return EXIT_ABORTED if watch.hard else code


async def _run_agent(
    agent: ConfiguredAgent, text: str, abort: AbortSignal, printer: Printer, as_json: bool
) -> int:
    config = agent.config
    try:
        async with agent:
            turn = await agent.run(text, abort=abort, observer=printer)
    except SimpleLLMFuncError as exc:
        code = report_error(exc, as_json=as_json)
        if config.trace.timeline:
            _print_trace(agent)
        return code
    _print_result(agent, turn, printer, as_json)
    if turn.aborted:
        print(f"aborted: {abort.reason or 'by request'}", file=sys.stderr, flush=True)
        _print_trace(agent)
        return EXIT_ABORTED
    if config.trace.timeline:
        _print_trace(agent)
    return EXIT_OK


def _print_result(
    agent: ConfiguredAgent, turn: TurnResult, printer: Printer, as_json: bool
) -> None:
    if not as_json:
        printer.finish(turn.text)
        return
    # The same JSON as run_config's result.
    print(dumps(ConfigRunResult.from_turn(turn, agent.recorder).to_dict()), flush=True)


def _print_trace(agent: ConfiguredAgent) -> None:
    """The (possibly partial) step timeline, on stderr (without the answer: stdout has it)."""
    try:
        records = agent.recorder.records
    except SimpleLLMFuncError:
        return  # the agent never opened: nothing ran
    if records:
        print(timeline(records, result=False), file=sys.stderr, flush=True)
