"""``simplellmfunc serve CONFIG``: open the configured agent and serve it until a signal.

The token comes from the environment (``serve.token_env``, default
``SIMPLELLMFUNC_SERVE_TOKEN``) or, for several principals, from a token file
(``--token-file`` / ``serve.token_file``), never from the command line; without one the server
refuses to start unless ``--no-auth`` is given, and ``--no-auth`` is refused on a non-loopback
address. The ``Host`` names answered are the loopback ones on loopback, else the configured
``--allowed-host`` / ``serve.allowed_hosts`` (required when bound to every interface).
SIGINT / SIGTERM stop it gracefully: running turns are aborted (each ends with a valid
history, A2A tasks end ``canceled``), then open requests get a few seconds to finish.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..exceptions import UserError
from ..runtime.config import AgentConfig, ConfiguredAgent, ServeLimits
from ._app import create_app
from ._edge import EdgePolicy
from ._principals import Principals, is_loopback
from ._served import ServedAgent
from ._uvicorn import serve_app

__all__ = ["ServeSettings", "is_loopback", "serve_config"]

logger = logging.getLogger("simplellmfunc.serve")


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Where and how to serve (the config's ``serve:`` section with command-line overrides)."""

    host: str
    port: int
    principals: Principals
    web: bool = False
    edge: EdgePolicy = field(default_factory=EdgePolicy)
    limits: ServeLimits = field(default_factory=ServeLimits)
    made_token: str | None = None  # a token made at start (``web`` off loopback), shown once
    page: bool = False  # ``simplellmfunc web``: announce the page's address only

    @classmethod
    def resolve(
        cls,
        config: AgentConfig,
        *,
        host: str | None = None,
        port: int | None = None,
        no_auth: bool = False,
        web: bool = False,
        token_file: str | None = None,
        allowed_hosts: Sequence[str] = (),
        environ: Mapping[str, str] | None = None,
        max_sessions: int | None = None,
        max_turns: int | None = None,
        idle_timeout: float | None = None,
        page: bool = False,
    ) -> ServeSettings:
        """The settings, checked; ``max_sessions``, ``max_turns`` and ``idle_timeout`` override
        the section's limits when given.

        ``page`` is ``simplellmfunc web`` (``serve --web`` for a person at a browser): without
        a token it serves loopback openly, and off loopback it makes a random token and shows
        it once, instead of refusing to start.

        Raises:
            UserError: Without a token and without ``no_auth``, with both a token file and a
                token (or ``no_auth``), ``no_auth`` off loopback, a wildcard bind address
                without allowed hosts, or a bad token file.
        """
        section = config.serve
        host = host or section.host
        port = section.port if port is None else port
        principals = Principals.resolve(
            section.token_env,
            token_file or section.token_file,
            no_auth=no_auth,
            host=host,
            environ=environ,
        )
        edge = EdgePolicy.for_server(config, host, allowed_hosts)
        made: str | None = None
        if principals is None and page:
            if is_loopback(host):
                principals = Principals.open()
            else:
                made = secrets.token_urlsafe(18)
                principals = Principals.single(made)
        if principals is None:
            raise UserError(
                f"set {section.token_env} to the bearer token clients must send, "
                "or give a token file (--token-file), or pass --no-auth (loopback only)"
            )
        limits = section.limits()
        limits = replace(
            limits,
            max_sessions=limits.max_sessions if max_sessions is None else max_sessions,
            max_turns=limits.max_turns if max_turns is None else max_turns,
            idle_timeout=limits.idle_timeout if idle_timeout is None else idle_timeout,
        )
        return cls(host, port, principals, web or page, edge, limits, made, page)


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
            limits=settings.limits,
            pyrepl=pyrepl,
            root=repl.working_directory if pyrepl and repl is not None else None,
        )

        def make_app(url: str) -> Any:
            return create_app(
                served,
                url,
                token=None,
                principals=settings.principals,
                a2a=section.a2a,
                web=settings.web,
                edge=settings.edge,
            )

        def announce(url: str) -> None:
            principals = settings.principals
            auth = "no auth" if not principals.required else "bearer token"
            if principals.scoped:
                auth = f"bearer tokens of {len(principals)} principals"
            if not settings.page:
                say(f"serving {served.name} at {url} ({auth})")
            if settings.web:  # the token's variable, never its value
                token = (
                    "?token=<your token>" if principals.scoped else f"?token=${section.token_env}"
                )
                if settings.made_token is not None:
                    token = f"?token={settings.made_token}"  # made here: the one place it shows
                page = f"{url}/" + (token if principals.required else "")
                say(f"{served.name}: open {page}" if settings.page else f"web chat page: {page}")

        await serve_app(
            make_app,
            settings.host,
            settings.port,
            before_shutdown=served.stop,
            announce=announce,
            policy=settings.edge,
        )
