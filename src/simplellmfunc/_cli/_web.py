"""``simplellmfunc web CFG``: the agent of a config file as a web chat page.

Each browser tab is a session with its own conversation and, when the config has ``pyrepl``,
its own kernel (the config's kernel options apply to each). Bound to loopback the page is open;
bound elsewhere it needs a token (``--token``, or a random one printed with the address).
Needs the ``[web]`` extra.
"""

from __future__ import annotations

import argparse
import functools
import secrets
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ..exceptions import ConfigError, SimpleLLMFuncError
from ..runtime import ConfiguredAgent, load_agent_config
from ._args import overrides_from
from ._output import EXIT_OK, report_error

__all__ = ["handle_web"]


def handle_web(args: argparse.Namespace) -> int:
    """Serve ``args.config`` until interrupted; return the exit status."""
    try:
        from starlette.applications import Starlette
        from starlette.routing import Mount

        from ..http_server import serve_app
        from ..webchat import is_loopback, web_chat_app
    except ImportError as exc:
        return report_error(ConfigError(f"the web page needs the [web] extra: {exc}"))
    try:
        config = load_agent_config(args.config, overrides=overrides_from(args))
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    if config.kind not in ("simple", "react"):
        return report_error(ConfigError(f"a {config.kind} agent cannot be served as a chat page"))
    if args.max_sessions < 1:
        return report_error(ConfigError("--max-sessions must be at least 1"))
    shared, pyrepl = config.split_pyrepl()
    token = args.token or (None if is_loopback(args.host) else secrets.token_urlsafe(18))
    opened: list[ConfiguredAgent] = []

    async def agent(*call_args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in opened[0].chat(*call_args, **kwargs):
            yield item

    page = web_chat_app(
        agent,
        pyrepl=pyrepl,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        token=token,
        title=config.name,
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with ConfiguredAgent(shared) as configured:
            opened.append(configured)
            async with page.router.lifespan_context(page):
                yield

    async def before_shutdown() -> None:
        # Running turns are aborted first: each ends with a valid history, and its stream
        # ends, so uvicorn's graceful shutdown does not wait for it.
        sessions = getattr(page.state, "sessions", None)
        if sessions is not None:
            await sessions.abort_running("the server is shutting down")

    def announce(url: str) -> None:
        address = f"{url}/" + (f"?token={token}" if token else "")
        print(f"{config.name}: open {address}", file=sys.stderr, flush=True)

    def make_app(url: str) -> Starlette:
        return Starlette(routes=[Mount("/", page)], lifespan=lifespan)

    anyio.run(
        functools.partial(
            serve_app,
            make_app,
            args.host,
            args.port,
            before_shutdown=before_shutdown,
            announce=announce,
        )
    )
    print("stopped", file=sys.stderr)
    return EXIT_OK
