"""``simplellmfunc web CFG``: the agent of a config file as a web chat page.

Each browser tab is a session with its own conversation and, when the config has ``pyrepl``,
its own kernel (the config's kernel options apply to each). Bound to loopback the page is open
unless a token is set; bound elsewhere it needs one. The token comes from the environment
(``serve.token_env``, default ``SIMPLELLMFUNC_SERVE_TOKEN``) or a token file
(``--token-file``: several principals, each with its own tabs), never from the command line;
off loopback without either, a random one is made and printed with the address. Needs the
``[web]`` extra.
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

        from ..serving import EdgePolicy, Principals, is_loopback, serve_app, web_chat_app
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
    section = config.serve
    made: str | None = None  # a token made here, printed once with the address
    try:
        edge = EdgePolicy.for_server(config, args.host, args.allowed_host)
        principals = Principals.resolve(section.token_env, args.token_file or section.token_file)
    except SimpleLLMFuncError as exc:
        return report_error(exc)
    if principals is None and is_loopback(args.host):
        principals = Principals.open()
    elif principals is None:
        made = secrets.token_urlsafe(18)
        principals = Principals.single(made)
    opened: list[ConfiguredAgent] = []

    async def agent(*call_args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        async for item in opened[0].chat(*call_args, **kwargs):
            yield item

    page = web_chat_app(
        agent,
        pyrepl=pyrepl,
        max_sessions=args.max_sessions,
        idle_timeout=args.idle_timeout,
        principals=principals,
        title=config.name,
        edge=edge,
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
        token = f"?token=${section.token_env}" if not principals.scoped else "?token=<your token>"
        if made is not None:
            token = f"?token={made}"  # made here: the one place it is shown
        address = f"{url}/" + (token if principals.required else "")
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
            policy=edge,
        )
    )
    print("stopped", file=sys.stderr)
    return EXIT_OK
