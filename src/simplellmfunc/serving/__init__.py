"""Serving: one agent, many remote callers, through one door and several fronts.

The door is :meth:`ServedAgent.turn`: an async iterator that admits a turn (the running-turn
limit), opens or reuses its session of the :class:`SessionStore` (a history, and with
``pyrepl`` a kernel, per session; ``input()``, approvals and aborts by session id; idle
reclaim, ``max_sessions``), streams the turn's events and its result, and releases it. Every
front adapts that iterator:

* **OpenAI** ``/v1/chat/completions`` (plain and streamed, client tools as deferred tools,
  ``response_format``, ``n``, images, usage) and ``/v1/responses`` (create, stream,
  ``previous_response_id``), ``/v1/models[/{id}]``: :func:`create_app`.
* **A2A** (the official ``a2a-sdk``, protocol 1.0 and 0.3 on one endpoint, the agent card at
  both well-known paths): :func:`a2a_app` / :func:`a2a_routes` / :func:`agent_card`.
* **The web chat page** (``/``, ``/static/``) and its JSON + SSE API (``/api/...``):
  :func:`web_chat_app` / :func:`web_chat_routes` (``simplellmfunc serve --web``; ``web`` is an
  alias of it).
* **AG-UI**: :class:`AGUIAdapter` / :func:`agui_sse_stream` (the ``[agui]`` extra);
  :func:`agui_run`: a served agent's turn (through its door) as AG-UI runs — a run that
  waits for a person ends on the interrupt outcome, the next run's ``resume`` entries answer
  it and it goes on
  (:func:`agui_interrupts`: the waiting requests as AG-UI ``Interrupt`` s).
* A turn that waits for a person (an approval, a PyRepl ``input()``) outlives a consumer that
  leaves: :meth:`SessionStore.pending` says what waits, :meth:`SessionStore.follow` takes the
  rest of the turn (:func:`wait_kind`, :func:`pending_request_id`, :func:`asked_request_id`
  read the requests).
* The wire encodings the fronts share: :func:`to_wire` / :class:`WirePolicy` (compact JSON with
  a size policy), :func:`encode_sse` / :func:`sse_stream` (Server-Sent Events).

The MCP server stays in :mod:`simplellmfunc.mcp_server` (it serves our builtins, not an agent).

Every app sits behind the :class:`EdgeGuard` under an :class:`EdgePolicy` (Host allowlist,
cross-origin refusal, bearer tokens of :class:`Principals`, JSON-only bounded bodies, nesting
limit, lone surrogates replaced; see ``docs/security.md``); a request speaks for a
:class:`Principal` (:func:`principal_of`) whose sessions, tasks, responses and deferred turns are
its own. :class:`ServeLimits` is the one set of limits (sessions, running turns, idle timeout,
history) read by code, config files and CLI flags. :func:`serve_config` opens a configured agent
and serves it until a signal; :func:`serve_app` serves any app that way; :func:`running` serves an
app in the current event loop while a block runs (tests, embedding).

Starlette, uvicorn, the A2A SDK and ``ag-ui-protocol`` are imported on first use of a name that
needs them.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish
from ..runtime.config import ServeLimits
from ._agents import AgentTurn, CallableAgent, DrivenTurn, SessionAgent
from ._client import AnswerShape, ClientHook, ClientTurn
from ._json import WirePolicy, jsonable, to_wire
from ._principals import (
    ANONYMOUS,
    LOOPBACK_NAMES,
    Principal,
    Principals,
    allowed_hosts_for,
    is_loopback,
)
from ._served import ServedAgent, TurnRequest
from ._session import Session
from ._sse import encode_sse, sse_stream
from ._store import OnDisconnect, SessionStore
from ._waits import asked_request_id, pending_request_id, wait_kind

if TYPE_CHECKING:
    from ._a2a import a2a_app, a2a_routes, agent_card
    from ._agui import AGUIAdapter, agui_resume_answers, agui_sse_stream
    from ._agui_runs import agui_interrupts, agui_run
    from ._app import create_app
    from ._edge import EdgeGuard, EdgePolicy, parse_json_body, principal_of, read_json
    from ._main import ServeSettings, serve_config
    from ._uvicorn import running, serve_app
    from ._web import web_chat_app, web_chat_routes

__all__ = [
    "ANONYMOUS",
    "LOOPBACK_NAMES",
    "AGUIAdapter",
    "AgentTurn",
    "AnswerShape",
    "CallableAgent",
    "ClientHook",
    "ClientTurn",
    "DrivenTurn",
    "EdgeGuard",
    "EdgePolicy",
    "OnDisconnect",
    "Principal",
    "Principals",
    "ServeLimits",
    "ServeSettings",
    "ServedAgent",
    "Session",
    "SessionAgent",
    "SessionStore",
    "TurnRequest",
    "WirePolicy",
    "a2a_app",
    "a2a_routes",
    "agent_card",
    "agui_interrupts",
    "agui_resume_answers",
    "agui_run",
    "agui_sse_stream",
    "allowed_hosts_for",
    "asked_request_id",
    "create_app",
    "encode_sse",
    "is_loopback",
    "jsonable",
    "parse_json_body",
    "pending_request_id",
    "principal_of",
    "read_json",
    "running",
    "serve_app",
    "serve_config",
    "sse_stream",
    "to_wire",
    "wait_kind",
    "web_chat_app",
    "web_chat_routes",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(("a2a_app", "a2a_routes", "agent_card"), "._a2a"),
        **dict.fromkeys(("AGUIAdapter", "agui_resume_answers", "agui_sse_stream"), "._agui"),
        **dict.fromkeys(("agui_interrupts", "agui_run"), "._agui_runs"),
        "create_app": "._app",
        **dict.fromkeys(
            ("EdgeGuard", "EdgePolicy", "parse_json_body", "principal_of", "read_json"), "._edge"
        ),
        **dict.fromkeys(("ServeSettings", "serve_config"), "._main"),
        **dict.fromkeys(("running", "serve_app"), "._uvicorn"),
        **dict.fromkeys(("web_chat_app", "web_chat_routes"), "._web"),
    },
)

publish(__name__, __all__)
