"""The command line's arguments: the parser of every command and the settings it gives."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["build_parser", "overrides_from"]


def _tool(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=COMMAND, got {text!r}")
    return name.strip(), command.strip()


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the agent config file (.yml, .yaml, .toml or .json)")
    parser.add_argument("--model", help="a model: 'provider:model', or a model name")
    parser.add_argument("--max-steps", type=int, help="most LLM calls per run")
    parser.add_argument(
        "--tool",
        action="append",
        type=_tool,
        default=[],
        metavar="NAME=CMD",
        help="an agent as a tool: CMD reads the task on stdin, prints the answer (repeatable)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting, e.g. --set limits.tool_timeout=60 (repeatable)",
    )


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", action="store_true", help="print the step timeline (stderr)")
    parser.add_argument("--trace-file", help="write trace records to F (.jsonl or .db)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    stream = parser.add_mutually_exclusive_group()
    stream.add_argument(
        "--stream", dest="stream", action="store_true", default=None, help="stream the answer"
    )
    stream.add_argument(
        "--no-stream", dest="stream", action="store_false", help="print it at the end"
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(
        prog="simplellmfunc", description="Run agents described by config files."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="run an agent once on an input")
    _add_common(run)
    run.add_argument("input", help="the input, or '-' to read it from stdin")
    run.add_argument("--format", choices=("text", "json"), default="text", help="output format")
    _add_run_options(run)
    repl = commands.add_parser("repl", help="talk to an agent, turn after turn")
    _add_common(repl)
    repl.add_argument("--session", help="the memory session name")
    _add_run_options(repl)
    validate = commands.add_parser("validate", help="check a config file and print its problems")
    _add_common(validate)
    worker = commands.add_parser(
        "worker", help="run the agent's sessions from a durable queue (the [durable] extra)"
    )
    _add_common(worker)
    worker.add_argument("--queue", required=True, help="the queue (from the durable: section)")
    worker.add_argument("--executor-id", help="this worker's id (default: host-pid)")
    worker.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    return parser


def overrides_from(args: argparse.Namespace) -> dict[str, Any]:
    """The command line's settings, as ``load_agent_config`` overrides."""
    overrides: dict[str, Any] = {}
    if args.model:
        overrides["model"] = args.model
    if args.max_steps is not None:
        overrides["max_steps"] = args.max_steps
    if getattr(args, "trace", False):
        overrides["timeline"] = True
    if getattr(args, "trace_file", None):
        overrides["trace_file"] = args.trace_file
    if getattr(args, "session", None):
        overrides["session"] = args.session
    if args.tool:
        overrides["tools"] = list(args.tool)
    if args.set:
        overrides["set"] = list(args.set)
    return overrides
