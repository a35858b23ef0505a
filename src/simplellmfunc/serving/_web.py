"""The chat page, its static files and its API on a ServedAgent (every tab's turn through its
door): as routes (to mount in another app, e.g. ``simplellmfunc serve --web``) or as an app of
its own."""

from __future__ import annotations

import html
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .._events import ResponseYield
from ..engine import parse_answer
from ..exceptions import (
    AnswerRefusedError,
    CapacityError,
    InputRefusedError,
    RequestRefusedError,
    SessionError,
)
from ..runtime.config import ServeLimits, TurnResult
from ..runtime.stores import Store
from ._edge import EdgeGuard, EdgePolicy, principal_of, read_json
from ._json import WirePolicy
from ._principals import Principals
from ._served import ServedAgent, TurnRequest
from ._store import SessionStore
from ._web_stream import page_history, turn_frames

__all__ = ["PAGE_PATHS", "STATIC_PREFIX", "page_error", "web_chat_app", "web_chat_routes"]

_STATIC = Path(__file__).parent / "static"
Handler = Callable[[Request], Awaitable[Response]]

#: The page's address: the one path that may carry the token as ``?token=``.
PAGE_PATHS = frozenset({"/"})
#: The page's own files (HTML, JavaScript, CSS: no secret): served without the token.
STATIC_PREFIX = "/static/"

#: HTTP statuses of a refused session (``SessionError.reason``).
_SESSION_STATUS = {"invalid_id": 400, "full": 503, "unknown": 404, "closed": 503}
# (any other reason, "busy" or "not_parked" among them, is 409)


def web_chat_app(
    agent: Callable[..., Any],
    *,
    sessions: SessionStore | None = None,
    pyrepl: bool | Mapping[str, Any] = True,
    limits: ServeLimits | None = None,
    store: Store | None = None,
    token: str | None = None,
    title: str = "simplellmfunc chat",
    max_message_chars: int = 20_000,
    policy: WirePolicy | None = None,
    edge: EdgePolicy | None = None,
    principals: Principals | None = None,
) -> Starlette:
    """The chat page and its API for ``agent``, as an ASGI app (serve it with uvicorn), behind
    an :class:`~simplellmfunc.serving.EdgeGuard` (Host, origin, token and body checks).

    Every browser tab is a session (its id lives in the tab's ``sessionStorage``, so a reload
    keeps the conversation): its own history and, with ``pyrepl``, its own kernel.

    Every tab's turn goes through a :class:`ServedAgent`'s door (:meth:`ServedAgent.turn`):
    admitted under ``limits`` (``max_turns``, the caps per principal) and counted while it
    runs, whether the app owns its sessions or is given them.

    Args:
        agent: An ``@llm_chat`` function (``stream=True`` for live text), a
            ``ConfiguredAgent``, any :class:`SessionAgent`, or a function (see
            :class:`CallableAgent` for how it is called).
        sessions: A :class:`SessionStore` of ``agent`` that the caller opens and closes (for
            an app mounted in another one, whose lifespan does not run): the page serves it
            through :meth:`ServedAgent.around`, under ``limits``' turn caps (the store keeps its
            own ``max_sessions`` and ``idle_timeout``); ``pyrepl`` and ``store`` are then
            ignored. Default: the app makes one and its lifespan owns it.
        pyrepl: Give each session a PyRepl kernel (``True``, or PyRepl keyword arguments).
        limits: Turns running at once (``max_turns``; more are refused with 429), open
            sessions at most (tabs beyond it are refused while all are busy; otherwise the
            least recently used idle session is reclaimed), the idle timeout after which a
            session's kernel is closed (its history stays in ``store``) and the kernels
            started ahead of time (:class:`~simplellmfunc.runtime.config.ServeLimits`).
        store: Where histories are kept (default: in memory).
        token: Required on the page (``?token=`` in its address; the page then sends it
            as ``Authorization: Bearer`` on its API calls) and on every API call; ``None``:
            open, for a server bound to loopback only.
        principals: Several tokens, each a principal with sessions of its own (instead of
            ``token``).
        title: The page's title.
        max_message_chars: Longer messages are refused (413).
        policy: The size policy of the events sent to the page (images are sent whole).
        edge: The hosts, origins and body limits requests must pass (default: loopback
            names only, 8 MiB bodies).
    """

    limits = limits or ServeLimits()
    # The one door, in every case: the tabs' turns are admitted and counted toward ``max_turns``.
    if sessions is not None:
        served = ServedAgent.around(sessions, limits=limits)
    else:
        served = ServedAgent(agent, limits=limits, pyrepl=pyrepl, store=store)
    routes = web_chat_routes(
        served, title=title, max_message_chars=max_message_chars, policy=policy
    )
    if principals is None:
        principals = Principals.single(token) if token is not None else Principals.open()
    guard = Middleware(
        EdgeGuard,
        policy=edge,
        principals=principals,
        default_shape=page_error,
        public_prefixes=(STATIC_PREFIX,),
        query_paths=PAGE_PATHS,
    )
    return Starlette(routes=routes, lifespan=served.lifespan, middleware=[guard])


def web_chat_routes(
    served: ServedAgent | None = None,
    *,
    title: str = "simplellmfunc chat",
    max_message_chars: int = 20_000,
    policy: WirePolicy | None = None,
) -> list[BaseRoute]:
    """The page (``/``), its files (``/static/``) and its API (``/api/...``) as routes, to
    mount in an app of one's own; that app's :class:`~simplellmfunc.serving.EdgeGuard`
    guards them (the page may carry the token as ``?token=``, its files need none). Each
    principal (``request.user``) sees its own sessions only. A tab's turn goes through the
    served agent's door (:meth:`ServedAgent.turn`: admitted, counted toward its limits).

    Args:
        served: The :class:`ServedAgent` whose sessions the tabs are (on a store of one's
            own: :meth:`ServedAgent.around`; default: the app's ``state.served``).
        title: The page's title.
        max_message_chars: Longer messages are refused (413).
        policy: The size policy of the events sent to the page (images are sent whole).
    """
    wire_policy = policy or WirePolicy()
    page_html = (_STATIC / "index.html").read_text(encoding="utf-8")
    page_html = page_html.replace("{{title}}", html.escape(title))

    def guard(handler: Handler) -> Handler:
        async def checked(request: Request) -> Response:
            try:
                if "sid" in request.path_params:
                    local = request.path_params["sid"]
                    request.scope["path_params"]["sid"] = principal_of(request).session_id(local)
                return await handler(request)
            except RequestRefusedError as exc:
                return error_response(exc.status, str(exc))
            except SessionError as exc:
                return error_response(_SESSION_STATUS.get(exc.reason, 409), str(exc))
            except CapacityError as exc:
                return error_response(503 if exc.limit == "closing" else 429, str(exc))

        return checked

    def served_of(request: Request) -> ServedAgent:
        found = served if served is not None else getattr(request.app.state, "served", None)
        if found is None:
            raise SessionError(
                "the chat is not open: its app's lifespan has not run", reason="closed"
            )
        return found

    def store_of(request: Request) -> SessionStore:
        return served_of(request).sessions

    async def page(request: Request) -> Response:
        return HTMLResponse(page_html)

    async def chat(request: Request) -> Response:
        body = await _json(request)
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            return error_response(400, "send {'message': <text>}")
        if len(message) > max_message_chars:
            return error_response(413, f"messages are limited to {max_message_chars} characters")
        door, sid = served_of(request), request.path_params["sid"]
        principal = principal_of(request).name
        door.admit(sid, principal)  # refused now, before the stream commits to 200
        session = await door.sessions.open_session(sid)
        if session.busy:
            return error_response(
                409, f"session {session.id!r} is running a turn: wait, or abort it"
            )
        turn = page_turn(door, session.id, message, principal)
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(
            turn_frames(turn, wire_policy), media_type="text/event-stream", headers=headers
        )

    async def answer(request: Request) -> Response:
        body = await _json(request)
        request_id, value = body.get("request_id"), body.get("value")
        if not isinstance(request_id, str) or not isinstance(value, str):
            return error_response(400, "send {'request_id': <id>, 'value': <text>}")
        try:
            store_of(request).submit_input(request.path_params["sid"], request_id, value)
        except InputRefusedError as exc:
            return error_response(409, str(exc))
        return JSONResponse({"ok": True})

    async def decide(request: Request) -> Response:
        # One wire form for every wait (docs/wire.md): an approval or an input() answer.
        try:
            request_id, reply = parse_answer(await _json(request))
        except AnswerRefusedError as exc:
            return error_response(400, str(exc))
        try:
            store_of(request).answer(request.path_params["sid"], request_id, reply)
        except (AnswerRefusedError, InputRefusedError) as exc:
            return error_response(409, str(exc))
        return JSONResponse({"ok": True})

    async def abort(request: Request) -> Response:
        sid = request.path_params["sid"]
        if sid not in store_of(request):
            return JSONResponse({"aborted": False})
        return JSONResponse({"aborted": store_of(request).abort(sid, "stopped by the user")})

    async def history(request: Request) -> Response:
        # Reading opens nothing: an id never used (or another principal's) is not found.
        store, sid = store_of(request), request.path_params["sid"]
        found = store.sessions.get(sid)
        stored = await store.history(sid)
        if found is None and not stored:
            raise SessionError(f"no session {_local(request, sid)!r}", reason="unknown")
        messages = page_history(stored, wire_policy.max_text_chars)
        busy = found is not None and found.busy
        # What the running turn waits for (an approval, an input()): the page redraws it.
        body = {"session": _local(request, sid), "busy": busy, "messages": messages}
        pending = store.pending(sid)
        running = found.turn_message if found is not None and pending else None
        return JSONResponse({**body, "pending": pending, "running_message": running})

    async def follow(request: Request) -> Response:
        # The rest of a turn whose page left while it waited for the user (a reload).
        items = store_of(request).follow(request.path_params["sid"])
        headers = {"cache-control": "no-store", "x-accel-buffering": "no"}
        return StreamingResponse(
            turn_frames(items, wire_policy), media_type="text/event-stream", headers=headers
        )

    async def overview(request: Request) -> Response:
        store, principal = store_of(request), principal_of(request)
        mine = []
        for session in store.sessions.values():
            local = principal.local_id(session.id)
            if local is not None:
                mine.append({**session.info(), "id": local})
        return JSONResponse(
            {
                "sessions": mine,
                "max_sessions": store.max_sessions,
                "idle_timeout": store.idle_timeout,
            }
        )

    return [
        Route("/", page),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
        Route("/api/chat/{sid}", guard(chat), methods=["POST"]),
        Route("/api/input/{sid}", guard(answer), methods=["POST"]),
        Route("/api/answer/{sid}", guard(decide), methods=["POST"]),
        Route("/api/abort/{sid}", guard(abort), methods=["POST"]),
        Route("/api/follow/{sid}", guard(follow), methods=["POST"]),
        Route("/api/history/{sid}", guard(history)),
        Route("/api/sessions", guard(overview)),
    ]


def error_response(status: int, message: str) -> Response:
    """An error the page shows: ``{"ok": false, "error": message}``."""
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def page_error(status: int, code: str, message: str) -> Response:
    """An edge refusal in the page's error shape."""
    return error_response(status, message)


def _local(request: Request, session_id: str) -> str:
    """The name the caller gave the session."""
    return principal_of(request).local_id(session_id) or session_id


async def _json(request: Request) -> dict[str, Any]:
    body = await read_json(request) if await request.body() else {}
    return body if isinstance(body, dict) else {}


async def page_turn(
    served: ServedAgent, session_id: str, message: str, principal: str = ""
) -> AsyncIterator[Any]:
    """A tab's turn through the one door (:meth:`ServedAgent.turn`), as the page's stream
    reads a session's turn (the events, then a ``ResponseYield`` with the history)."""
    asked = TurnRequest(message, session_id, principal=principal)
    async with aclosing(served.turn(asked)) as items:
        async for item in items:
            yield ResponseYield(item.text, item.history) if isinstance(item, TurnResult) else item
