"""Run the mock LLM server as a process, for benchmarks and manual tests.

Usage::

    python -m simplellmfunc.testing.mock_server --port 0 --reply-text ok --chunks 4

Prints ``READY <url>`` (the base URL including ``/v1``) on stdout once listening, then answers
every request with the reply described by the flags until SIGINT or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

import anyio

from ._script import Reply
from ._server import MockLLMServer

__all__ = ["main", "parse_args"]


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
    return parser.parse_args(argv)


def _default_reply(args: argparse.Namespace) -> Reply:
    return Reply.text(
        args.reply_text,
        chunks=args.chunks,
        ttft=args.ttft,
        chunk_delay=args.chunk_delay,
        usage=None if args.no_usage else (10, 5),
    )


async def _serve(args: argparse.Namespace) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with MockLLMServer(default=_default_reply(args), port=args.port) as server:
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
