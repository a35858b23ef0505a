"""``simplellmfunc web CFG``: an alias of ``simplellmfunc serve CFG --web`` for a person at a
browser (the same code path, limits and flags).

Each browser tab is a session with its own conversation and, when the config has ``pyrepl``,
its own kernel. The token comes from the environment (``serve.token_env``, default
``SIMPLELLMFUNC_SERVE_TOKEN``) or a token file (``--token-file``: several principals, each with
its own tabs), never from the command line. Unlike ``serve``, without either it does not refuse
to start: bound to loopback the page is open, and off loopback a random token is made and
printed once with the address. Needs the ``[web]`` extra.
"""

from __future__ import annotations

import argparse

from ._serve import handle_serve

__all__ = ["handle_web"]


def handle_web(args: argparse.Namespace) -> int:
    """Serve ``args.config`` with its web page until interrupted; return the exit status."""
    args.web, args.no_auth = True, False
    return handle_serve(args, page=True)
