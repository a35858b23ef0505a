"""Run the mock LLM server as a process, for benchmarks and manual tests.

Usage::

    python -m simplellmfunc.testing.mock_server --port 0 --reply-text ok --chunks 4

Prints ``READY <url>`` (the base URL including ``/v1``) on stdout once listening, then answers
every request with the reply described by the flags until SIGINT or SIGTERM.

Multi-step ReAct turns (for engine benchmarks): with ``--react-steps N`` a request whose messages
hold fewer than ``N - 1`` assistant tool-call turns after the last user message is answered with
``--parallel`` calls of ``--tool-name`` (arguments ``--tool-args``), else with the text reply; so
each user turn takes exactly ``N`` LLM calls::

    python -m simplellmfunc.testing.mock_server --react-steps 3 --tool-name noop --parallel 8
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Sequence

import anyio

from ._script import RecordedRequest, Reply, ScriptItem, ToolCallSpec
from ._server import MockLLMServer

__all__ = ["main", "parse_args", "react_reply"]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        prog="python -m simplellmfunc.testing.mock_server",
        description="Serve scripted OpenAI-compatible replies on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port (0: any free port)")
    parser.add_argument("--reply-text", default="ok", help="text of every reply")
    parser.add_argument("--chunks", type=int, default=1, help="stream pieces of the text")
    parser.add_argument("--ttft", type=float, default=0.0, help="seconds before headers")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between events")
    parser.add_argument("--no-usage", action="store_true", help="send no usage")
    parser.add_argument("--react-steps", type=int, default=1, help="LLM calls per user turn")
    parser.add_argument("--tool-name", default="noop", help="tool called in --react-steps mode")
    parser.add_argument("--tool-args", default="{}", help="JSON arguments of those calls")
    parser.add_argument("--parallel", type=int, default=1, help="tool calls per tool turn")
    parser.add_argument(
        "--only-with-tools", action="store_true", help="call tools only when some are offered"
    )
    return parser.parse_args(argv)


def _default_reply(args: argparse.Namespace) -> Reply:
    return Reply.text(
        args.reply_text,
        chunks=args.chunks,
        ttft=args.ttft,
        chunk_delay=args.chunk_delay,
        usage=None if args.no_usage else (10, 5),
    )


def _tool_turns(messages: list[dict[str, object]]) -> int:
    """Assistant tool-call turns after the last user message."""
    turns = 0
    for message in reversed(messages):
        if message.get("role") == "user":
            break
        turns += message.get("role") == "assistant" and bool(message.get("tool_calls"))
    return turns


def react_reply(args: argparse.Namespace) -> ScriptItem:
    """The reply the server gives every request for these flags (:func:`parse_args`); an
    in-process :class:`MockLLMServer` with it as ``default`` answers like the process."""
    text = _default_reply(args)
    if args.react_steps <= 1:
        return text
    calls = [ToolCallSpec(args.tool_name, json.loads(args.tool_args))] * args.parallel
    usage = None if args.no_usage else (10, 5)
    tool_reply = Reply.tool_calls(
        *calls, chunks=args.chunks, ttft=args.ttft, chunk_delay=args.chunk_delay, usage=usage
    )

    def reply(request: RecordedRequest) -> Reply:
        messages = request.json.get("messages") or []
        if args.only_with_tools and not request.json.get("tools"):
            return text
        return tool_reply if _tool_turns(messages) < args.react_steps - 1 else text

    return reply


async def _serve(args: argparse.Namespace) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        # Keep no request log: this server runs for whole benchmarks.
        server_options = {"default": react_reply(args), "port": args.port, "max_records": 0}
        async with MockLLMServer(**server_options) as server:
            print(f"READY {server.url}", flush=True)
            async for _ in signals:
                return


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until interrupted; return the exit status."""
    args = parse_args(argv)
    anyio.run(_serve, args, backend="asyncio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
