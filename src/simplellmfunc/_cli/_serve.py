"""``simplellmfunc serve CFG``: serve a configured agent over HTTP (A2A, OpenAI-compatible;
``--web``: the web chat page too, on the same sessions, token and limits; ``simplellmfunc web``
is an alias of ``serve --web``)."""

from __future__ import annotations

import argparse
import sys

import anyio

from ..exceptions import ConfigError, SimpleLLMFuncError
from ..runtime import load_agent_config
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["handle_serve"]


def handle_serve(args: argparse.Namespace, *, page: bool = False) -> int:
    """Serve until SIGINT / SIGTERM; the exit status (``page``: as ``web``, see
    :meth:`ServeSettings.resolve`)."""
    try:
        from ..serving import ServeSettings, serve_config
    except ImportError as exc:
        return report_error(ConfigError(f"serving needs the [web] extra: {exc}"))

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
            max_sessions=args.max_sessions,
            max_turns=args.max_turns,
            idle_timeout=args.idle_timeout,
            page=page,
        )
        anyio.run(serve_config, config, settings, _say)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    print("stopped", file=sys.stderr)
    return EXIT_OK


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
