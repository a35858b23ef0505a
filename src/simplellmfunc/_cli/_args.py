"""The command line's arguments: the parser of every command and the settings it gives."""

from __future__ import annotations

import argparse
from typing import Any

from ..runtime.config import ServeLimits

__all__ = ["build_parser", "overrides_from"]


def _tool(text: str) -> tuple[str, str]:
    name, sep, command = text.partition("=")
    if not sep or not name.strip() or not command.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=COMMAND, got {text!r}")
    return name.strip(), command.strip()


def _no_secret(text: str) -> str:
    raise argparse.ArgumentTypeError(
        "--token is gone: a secret on the command line shows in the process list; set "
        "SIMPLELLMFUNC_SERVE_TOKEN (serve.token_env) or pass --token-file FILE"
    )


def _add_access(parser: argparse.ArgumentParser) -> None:
    """Who may call a server, and by which names: never a secret on the command line."""
    parser.add_argument(
        "--token-file",
        metavar="FILE",
        help="'PRINCIPAL TOKEN' lines: several principals, each with its own sessions",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name clients use when not on loopback (repeatable; '*': any)",
    )
    parser.add_argument("--token", type=_no_secret, help=argparse.SUPPRESS)


def _add_server(parser: argparse.ArgumentParser) -> None:
    """Where a server listens, who may call it and its limits (``serve`` and ``web``): the
    flags override the config's ``serve:`` section, whose defaults are ``ServeLimits``'."""
    parser.add_argument("--host", help="the address to listen on (default: serve.host, loopback)")
    parser.add_argument("--port", type=int, help="the port (default: serve.port; 0: any free one)")
    _add_access(parser)
    defaults = ServeLimits()
    parser.add_argument(
        "--max-sessions",
        type=int,
        help=f"sessions open at once (default: serve.max_sessions, {defaults.max_sessions})",
    )
    parser.add_argument(
        "--max-turns",
        type=int,
        help=f"turns running at once (default: serve.max_turns, {defaults.max_turns})",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        help=f"seconds before an idle session goes (default: serve.idle_timeout, "
        f"{defaults.idle_timeout})",
    )


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


def _add_rag(commands: Any) -> None:
    """Add ``rag`` and its sub-commands to the top-level sub-parsers."""
    rag = commands.add_parser("rag", help="build and search knowledge bases")
    actions = rag.add_subparsers(dest="rag_command", required=True, metavar="ACTION")
    ingest = actions.add_parser("ingest", help="add or refresh files and folders")
    ingest.add_argument("paths", nargs="+", help="files and folders")
    ingest.add_argument("--no-prune", action="store_true", help="keep files gone from a folder")
    ingest.add_argument("--embed-url", help="an OpenAI-compatible /embeddings API root")
    ingest.add_argument("--embed-model", help="the embedding model")
    ingest.add_argument("--embed-key-env", help="the variable holding the embeddings API key")
    ingest.add_argument("--dimensions", type=int, help="ask for vectors of this size")
    search = actions.add_parser("search", help="print the passages that best match a query")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5, help="how many passages (default 5)")
    search.add_argument("--mode", choices=("bm25", "dense", "hybrid"), help="search mode")
    search.add_argument("--budget", type=int, default=4000, help="most tokens printed")
    search.add_argument("--embed-key-env", help="the variable holding the embeddings API key")
    actions.add_parser("list", help="list the ingested sources")
    delete = actions.add_parser("delete", help="forget files, folders or sources")
    delete.add_argument("paths", nargs="+", help="paths or sources as cited")
    for parser in actions.choices.values():
        parser.add_argument("--kb", required=True, help="the knowledge base: a name or a file")
        parser.add_argument("--format", choices=("text", "json"), default="text")


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
    web = commands.add_parser(
        "web", help="serve the agent with its web chat page: an alias of 'serve --web'"
    )
    _add_common(web)
    _add_server(web)
    chat = commands.add_parser("chat", help="chat with an agent in the terminal UI (Textual)")
    _add_common(chat)
    chat.add_argument("--session", help="keep the conversation under NAME and resume it")
    chat.add_argument("--history-db", help="the SQLite file of --session histories")
    chat.add_argument("--price", metavar="IN,OUT", help="USD per million tokens, for the cost")
    validate = commands.add_parser("validate", help="check a config file and print its problems")
    _add_common(validate)
    serve = commands.add_parser(
        "serve", help="serve an agent over HTTP (A2A, OpenAI-compatible chat completions)"
    )
    _add_common(serve)
    _add_server(serve)
    serve.add_argument(
        "--no-auth", action="store_true", help="serve without a bearer token (loopback only)"
    )
    serve.add_argument(
        "--web", action="store_true", help="serve the web chat page too (open /?token=...)"
    )
    _add_rag(commands)
    from ._local import add_local

    add_local(commands)
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
    if getattr(args, "session", None) and args.command != "chat":
        overrides["session"] = args.session
    if args.tool:
        overrides["tools"] = list(args.tool)
    if args.set:
        overrides["set"] = list(args.set)
    return overrides
