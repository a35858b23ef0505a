"""``simplellmfunc serve CFG``: serve a configured agent over HTTP (A2A, OpenAI-compatible;
``--web``: the web chat page too, on the same sessions and token)."""

from __future__ import annotations

import argparse
import sys

import anyio

from ..exceptions import SimpleLLMFuncError
from ..runtime import load_agent_config
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["handle_serve"]


def handle_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT / SIGTERM; the exit status."""
    from ..serving import ServeSettings, serve_config

    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
        settings = ServeSettings.resolve(
            config,
            host=args.host,
            port=args.port,
            no_auth=args.no_auth,
            web=args.web,
            token_file=args.token_file,
            allowed_hosts=args.allowed_host,
        )
        anyio.run(serve_config, config, settings, _say)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    print("stopped", file=sys.stderr)
    return EXIT_OK


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
