"""``python -m simplellmfunc.mcp_server serve --pyrepl --files DIR [--http PORT]``.

Serves PyRepl and / or FileToolset over MCP (stdio by default, streamable HTTP on 127.0.0.1
with ``--http``) so any MCP client can use them. Off loopback (``--host``) the HTTP server needs
the names clients reach it by (``--allowed-host``) and a token: ``SIMPLELLMFUNC_MCP_TOKEN`` in
the environment, or a token file (``--token-file``), never one on the command line.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio

from ..exceptions import SimpleLLMFuncError
from ._server import MCP_TOKEN_ENV, http_edge, serve_mcp

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simplellmfunc.mcp_server")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve builtin toolsets over MCP")
    serve.add_argument("--pyrepl", action="store_true", help="serve a PyRepl (Python kernel)")
    serve.add_argument("--files", metavar="DIR", help="serve FileToolset tools for DIR")
    serve.add_argument("--http", metavar="PORT", type=int, help="streamable HTTP on this port")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP host (default: 127.0.0.1)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name clients use (off loopback; repeatable; '*': any)",
    )
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help=f"tokens accepted over HTTP (else the token in ${MCP_TOKEN_ENV})",
    )
    serve.add_argument("--name", default="simplellmfunc", help="server name for clients")
    serve.add_argument("--log-level", default="WARNING", help="log level (to stderr)")
    return parser


async def _serve(options: argparse.Namespace) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signal, group.cancel_scope)
        await _serve_toolsets(options)
        group.cancel_scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    # SIGTERM (how MCP clients stop a stdio server) becomes a cancellation, so the kernel and
    # its files are cleaned up instead of the process dying mid-flight.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            scope.cancel()
            return


async def _serve_toolsets(options: argparse.Namespace) -> None:
    async with AsyncExitStack() as stack:
        toolkit: list[Any] = []
        if options.pyrepl:
            from ..builtin import PyRepl

            repl = await stack.enter_async_context(PyRepl(working_directory=options.files))
            toolkit.extend(repl.toolset)
        if options.files:
            from ..builtin import FileToolset

            toolkit.extend(FileToolset(options.files).toolset)
        if options.http is None:
            await serve_mcp(toolkit, name=options.name)
            return
        await serve_mcp(
            toolkit,
            name=options.name,
            transport="http",
            host=options.host,
            port=options.http,
            principals=options.principals,
            allowed_hosts=options.allowed_host,
            announce=lambda url: print(f"serving MCP on {url}/mcp", file=sys.stderr, flush=True),
        )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    options = _parser().parse_args(argv)
    if not (options.pyrepl or options.files):
        print("serve: give --pyrepl and/or --files DIR", file=sys.stderr)
        return 2
    # Logs go to stderr: over stdio, stdout carries the protocol.
    logging.basicConfig(level=options.log_level.upper(), stream=sys.stderr)
    try:
        if options.http is not None:  # a refused setup fails here, before anything starts
            from ..serving import Principals

            options.principals = Principals.resolve(
                MCP_TOKEN_ENV, options.token_file, host=options.host
            )
            http_edge(options.host, options.principals, options.allowed_host)
        anyio.run(_serve, options)
    except KeyboardInterrupt:
        return 130
    except SimpleLLMFuncError as exc:  # a refused setup (no token off loopback, a bad file)
        print(f"serve: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
