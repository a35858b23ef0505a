"""The ASGI app of ``simplellmfunc serve``: A2A, OpenAI-compatible chat completions, health.

Routes:

* ``GET /health``: ``{"status": "ok", "agent", "sessions", "running"}`` (no auth);
* ``GET /.well-known/agent-card.json``: the A2A agent card (no auth: it is how clients find
  out how to call, and it says bearer tokens are needed);
* ``POST /a2a``: the A2A JSON-RPC endpoint (send, stream, get, cancel);
* ``POST /v1/chat/completions``, ``GET /v1/models``: the OpenAI-compatible endpoint.

With a token every other request needs ``Authorization: Bearer <token>`` (401 otherwise). On
shutdown the running turns are aborted first and each ends with a valid history
(:meth:`ServedAgent.aclose`). More routes (a web page ...) go in with ``routes=`` or
``app.router.routes``; they sit behind the same auth.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ..runtime.serving import ServedAgent, a2a_routes
from ._openai import chat_completions, error_response, models

__all__ = ["PUBLIC_PATHS", "agent_routes", "create_app"]

PUBLIC_PATHS = frozenset({"/health", "/.well-known/agent-card.json"})


class BearerAuth:
    """Refuses requests without ``Authorization: Bearer <token>`` (paths in ``PUBLIC_PATHS``
    excepted)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in PUBLIC_PATHS:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                response = error_response(401, "a valid bearer token is required")
                response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app(
    served: ServedAgent,
    base_url: str,
    *,
    token: str | None,
    a2a: bool = True,
    routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The app serving ``served`` at ``base_url`` (``http://host:port``).

    Args:
        served: The agent (opened by the app for its lifetime unless it is open already).
        base_url: Where clients reach the app (it goes into the agent card).
        token: The bearer token every request needs; ``None``: no auth.
        a2a: Serve A2A too (needs the ``a2a`` extra).
        routes: More routes to mount (behind the same auth), e.g. a web chat page.
    """
    app = Starlette(routes=[*agent_routes(served), *routes], lifespan=served.lifespan)
    if a2a:
        app.router.routes.extend(a2a_routes(served, base_url, bearer=token is not None))
    if token is not None:
        app.add_middleware(BearerAuth, token=token)
    return app


def agent_routes(served: ServedAgent) -> list[BaseRoute]:
    """``/health`` and the OpenAI-compatible routes of ``served``."""

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "agent": served.name,
                "sessions": len(served.session_ids),
                "running": served.running,
            }
        )

    async def completions(request: Request) -> Response:
        return await chat_completions(served, request)

    async def list_models(request: Request) -> Response:
        return await models(served)

    return [
        Route("/health", health, methods=["GET"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
    ]
