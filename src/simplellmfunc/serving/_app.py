"""The ASGI app of ``simplellmfunc serve``: A2A, OpenAI-compatible chat completions, health.

Routes:

* ``GET /health``: ``{"status": "ok", "agent", "sessions", "running"}`` (no auth);
* ``GET /.well-known/agent-card.json``: the A2A agent card (no auth: it is how clients find
  out how to call, and it says bearer tokens are needed);
* ``POST /a2a``: the A2A JSON-RPC endpoint (send, stream, get, cancel);
* ``POST /v1/chat/completions``, ``POST /v1/responses``, ``GET /v1/models``,
  ``GET /v1/models/{id}``: the OpenAI-compatible endpoints (``._openai``, ``._responses``).

With ``web=True`` the app also serves the web chat page (``/``, ``/static/``, ``/api/...`` of
:func:`~simplellmfunc.serving.web_chat_routes`) on the same sessions: a browser tab is a session
of the served agent like an ``X-Session-Id`` caller's.

Every request passes the :class:`~simplellmfunc.serving.EdgeGuard` first: its
``Host`` must be one the server answers to, a state-changing request must come from the
server's own origin (or an allowed one) with a bounded ``application/json`` body, and with
tokens every other request needs ``Authorization: Bearer <token>`` (401 otherwise; the page's
address may carry it as ``?token=``, and the page's static files need none). With a token
file each principal's sessions and A2A tasks are its own. On shutdown the running turns are
aborted first and each ends with a valid history (:meth:`ServedAgent.stop`). More routes go
in with ``routes=`` or ``app.router.routes``; they sit behind the same edge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ._a2a import a2a_routes
from ._edge import EdgeGuard, EdgePolicy, ErrorShape, jsonrpc_error
from ._errors import error_response
from ._openai import PendingTurns, chat_completions, models
from ._principals import Principals
from ._responses import ResponseLog, create_response
from ._served import ServedAgent
from ._web import PAGE_PATHS, STATIC_PREFIX, page_error, web_chat_routes

__all__ = ["PUBLIC_PATHS", "agent_routes", "create_app"]

#: No auth: health, and the A2A card at every path ``a2a_routes`` serves it (how clients find
#: out that they need a token).
PUBLIC_PATHS = frozenset(
    {"/health"}
    | {
        f"{root}/.well-known/{name}"
        for root in ("", "/a2a")
        for name in ("agent-card.json", "agent.json")
    }
)


def create_app(
    served: ServedAgent,
    base_url: str,
    *,
    token: str | None,
    a2a: bool = True,
    web: bool = False,
    routes: Sequence[BaseRoute] = (),
    principals: Principals | None = None,
    edge: EdgePolicy | None = None,
) -> Starlette:
    """The app serving ``served`` at ``base_url`` (``http://host:port``).

    Args:
        served: The agent (opened by the app for its lifetime unless it is open already).
        base_url: Where clients reach the app (it goes into the agent card).
        token: The bearer token every request needs; ``None``: no auth.
        a2a: Serve A2A too (needs the ``a2a`` extra).
        web: Serve the web chat page too, on the same sessions and behind the same token.
        routes: More routes to mount (behind the same edge).
        principals: Several tokens, each a principal whose sessions and tasks are its own
            (instead of ``token``).
        edge: The hosts, origins and body limits every request must pass (default: the
            loopback names, 8 MiB bodies).
    """
    if principals is None:
        principals = Principals.single(token) if token is not None else Principals.open()
    app = Starlette(routes=[*agent_routes(served), *routes], lifespan=served.lifespan)
    if a2a:
        app.router.routes.extend(a2a_routes(served, base_url, bearer=principals.required))
    page: dict[str, Any] = {}
    if web:
        app.router.routes.extend(web_chat_routes(served, title=served.name))
        page = {"public_prefixes": (STATIC_PREFIX,), "query_paths": PAGE_PATHS}
    shapes: list[tuple[str, ErrorShape]] = [("/api/", page_error), ("/a2a", jsonrpc_error)]
    app.add_middleware(
        EdgeGuard,
        policy=edge,
        principals=principals,
        shapes=shapes,
        default_shape=_refuse,
        public=PUBLIC_PATHS,
        **page,
    )
    return app


def _refuse(status: int, code: str, message: str) -> Response:
    """An edge refusal in OpenAI's error shape (``invalid_api_key`` for a bad token)."""
    if status == 401:
        return error_response(status, message, "authentication_error", "invalid_api_key")
    return error_response(status, message, "invalid_request_error", code)


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

    pending = PendingTurns()

    async def completions(request: Request) -> Response:
        return await chat_completions(served, request, pending)

    async def list_models(request: Request) -> Response:
        return await models(served)

    async def get_model(request: Request) -> Response:
        return await models(served, request.path_params["model"])

    log = ResponseLog()

    async def responses(request: Request) -> Response:
        return await create_response(served, log, request)

    return [
        Route("/health", health, methods=["GET"]),
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/models/{model:path}", get_model, methods=["GET"]),
    ]
