"""A stdio "MCP server" that fails before the handshake, the ways real ones do.

Usage: ``failing_server.py MODE [ARG]``

- ``exit CODE``: write two lines to stderr and exit with ``CODE``.
- ``noisy LINES``: write ``LINES`` numbered long lines to stderr, then exit with 1.
- ``secret NAME``: write the value of the environment variable ``NAME`` to stderr (a server
  that dumps its configuration), then exit with 1.
- ``killed``: kill itself with SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    mode, arg = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    if mode == "exit":
        print("starting the failing server", file=sys.stderr)
        print(f"fatal: cannot open the database (exit {arg})", file=sys.stderr, flush=True)
        sys.exit(int(arg))
    if mode == "noisy":
        for number in range(int(arg)):
            print(f"noise line {number:04d} " + "x" * 300, file=sys.stderr)
        sys.exit(1)
    if mode == "secret":
        print(f"config: token={os.environ.get(arg, '<unset>')} ready", file=sys.stderr, flush=True)
        sys.exit(1)
    if mode == "killed":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
