"""The ``simplellmfunc`` command line: ``run``, ``repl``, ``validate`` an agent config, and
serve its sessions from a durable queue (``worker``).

::

    simplellmfunc run agent.yml "compute 1+2+...+100" --trace
    echo "a task" | simplellmfunc run worker.yml --quiet -
    simplellmfunc repl agent.yml
    simplellmfunc validate agent.yml
    simplellmfunc worker agent.yml --queue sessions

Exit codes: 0 done, 1 the run failed otherwise, 2 bad config or command line, 3 the model
provider failed, 4 a tool could not be started or used, 130 aborted (Ctrl-C).
"""

from __future__ import annotations

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
        if args.command == "repl":
            from ._repl import handle_repl

            return handle_repl(args)
        if args.command == "worker":
            from ._worker import handle_worker

            return handle_worker(args)
        from ._validate import handle_validate

        return handle_validate(args)
    except KeyboardInterrupt:  # before the signal handlers are installed, or after
        print("aborted", file=sys.stderr)
        return EXIT_ABORTED
