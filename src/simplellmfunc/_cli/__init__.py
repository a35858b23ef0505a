"""The ``simplellmfunc`` command line: ``run``, ``repl``, ``validate``, ``serve`` and ``web``
(a chat page) and ``chat`` (a terminal UI) for an agent config; ``worker`` serves its sessions from
a durable queue; ``rag`` builds and searches knowledge bases; ``local`` runs a small local model
(llama.cpp's ``llama-server``) in the background and prints the ``.env`` lines for it.

::

    simplellmfunc run agent.yml "compute 1+2+...+100" --trace
    echo "a task" | simplellmfunc run worker.yml --quiet -
    simplellmfunc repl agent.yml
    simplellmfunc web agent.yml --port 8000
    simplellmfunc chat agent.yml --session work
    simplellmfunc validate agent.yml
    SIMPLELLMFUNC_SERVE_TOKEN=secret simplellmfunc serve agent.yml --port 8000
    SIMPLELLMFUNC_SERVE_TOKEN=secret simplellmfunc serve agent.yml --web
    simplellmfunc rag ingest docs/ --kb project
    simplellmfunc rag search "how do I abort a run?" --kb project
    simplellmfunc worker agent.yml --queue sessions
    simplellmfunc local start --model smollm2      # then: local status | local stop

Exit codes: 0 done, 1 the run failed otherwise, 2 bad config or command line, 3 the model
provider failed, 4 a tool could not be started or used, 130 aborted (Ctrl-C).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ._args import build_parser, overrides_from
from ._output import EXIT_ABORTED

__all__ = ["build_parser", "main", "overrides_from"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "run":
            from ._run import handle_run

            return handle_run(args)
        if args.command == "rag":
            from ._rag import handle_rag

            return handle_rag(args)
        if args.command == "chat":
            from ._chat import handle_chat

            return handle_chat(args)
        if args.command == "repl":
            from ._repl import handle_repl

            return handle_repl(args)
        if args.command == "serve":
            from ._serve import handle_serve

            return handle_serve(args)
        if args.command == "web":
            from ._web import handle_web

            return handle_web(args)
        if args.command == "local":
            from ._local import handle_local

            return handle_local(args)
        if args.command == "worker":
            from ._worker import handle_worker

            return handle_worker(args)
        from ._validate import handle_validate

        return handle_validate(args)
    except KeyboardInterrupt:  # before the signal handlers are installed, or after
        print("aborted", file=sys.stderr)
        return EXIT_ABORTED
    except BrokenPipeError:  # `simplellmfunc ... | head`: the reader left, which is fine
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
        return 0
