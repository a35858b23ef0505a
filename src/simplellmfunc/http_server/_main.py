"""``simplellmfunc serve CONFIG``: open the configured agent and serve it until a signal.

The token comes from the environment (``serve.token_env``, default
``SIMPLELLMFUNC_SERVE_TOKEN``), never from the command line; without one the server refuses to
start unless ``--no-auth`` is given, and ``--no-auth`` is refused on a non-loopback address.
SIGINT / SIGTERM stop it gracefully: running turns are aborted (each ends with a valid
history, A2A tasks end ``canceled``), then open requests get a few seconds to finish.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..exceptions import UserError
from ..runtime.config import AgentConfig, ConfiguredAgent
from ..runtime.serving import ServedAgent
from ..webchat import is_loopback
from ._app import create_app
from ._uvicorn import serve_app

__all__ = ["ServeSettings", "is_loopback", "serve_config"]

logger = logging.getLogger("simplellmfunc.serve")


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Where and how to serve (the config's ``serve:`` section with command-line overrides)."""

    host: str
    port: int
    token: str | None
    web: bool = False

    @classmethod
    def resolve(
        cls,
        config: AgentConfig,
        *,
        host: str | None = None,
        port: int | None = None,
        no_auth: bool = False,
        web: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> ServeSettings:
        """The settings, checked.

        Raises:
            UserError: Without a token and without ``no_auth``, or ``no_auth`` off loopback.
        """
        section = config.serve
        host = host or section.host
        port = section.port if port is None else port
        if no_auth:
            if not is_loopback(host):
                raise UserError(f"--no-auth is allowed on loopback only, not on {host!r}")
            return cls(host, port, None, web)
        token = (environ if environ is not None else os.environ).get(section.token_env)
        if not token:
            raise UserError(
                f"set {section.token_env} to the bearer token clients must send, "
                "or pass --no-auth (loopback only)"
            )
        return cls(host, port, token, web)


async def serve_config(
    config: AgentConfig, settings: ServeSettings, say: Callable[[str], None] = logger.info
) -> None:
    """Open the agent, serve it until SIGINT / SIGTERM, then close everything; ``say`` gets
    the lines that tell where it listens (the command prints them).

    A ``react`` agent with a ``toolkit.pyrepl`` (and no handoffs) gets a kernel per session
    (``<working_directory>/<session id>/work``) instead of one shared by every caller.
    """
    section = config.serve
    repl = config.toolkit.pyrepl
    pyrepl: dict[str, Any] | bool = False
    if config.kind == "react" and not config.handoffs:
        config, pyrepl = config.split_pyrepl()
    async with ConfiguredAgent(config) as agent:
        served = ServedAgent(
            agent,
            max_sessions=section.max_sessions,
            idle_timeout=section.idle_timeout,
            max_turns=section.max_turns,
            pyrepl=pyrepl,
            pool_size=section.pool_size if pyrepl else 0,
            root=repl.working_directory if pyrepl and repl is not None else None,
        )

        def make_app(url: str) -> Any:
            return create_app(served, url, token=settings.token, a2a=section.a2a, web=settings.web)

        def announce(url: str) -> None:
            auth = "bearer token" if settings.token else "no auth"
            say(f"serving {served.name} at {url} ({auth})")
            if settings.web:  # the token's variable, never its value
                page = f"{url}/" + (f"?token=${section.token_env}" if settings.token else "")
                say(f"web chat page: {page}")

        await serve_app(
            make_app,
            settings.host,
            settings.port,
            before_shutdown=served.aclose,
            announce=announce,
        )
