"""Agents served to remote callers: A2A on the official ``a2a-sdk`` (extra ``[a2a]``), and
the building blocks of ``simplellmfunc serve``.

* :class:`ServedAgent`: an ``@llm_chat`` agent or an open ``ConfiguredAgent`` answering remote
  callers on a :class:`~simplellmfunc.runtime.sessions.SessionStore` (a history, and with
  ``pyrepl`` a kernel, per session; abort by session; idle reclaim), plus its public name, a
  limit on running turns, stateless turns and a graceful close.
* :class:`ClientTurn` / :class:`ClientHook` / :class:`AnswerShape`: what an API client brings
  to a turn (its own tools, run client-side as deferred tools; a tool choice; the shape of the
  answer), as a run hook of that turn.
* :func:`a2a_app` / :func:`a2a_routes` / :func:`agent_card`: the agent as an A2A server
  (agent card at the well-known path, message send and stream, task get and cancel; our events
  become task status and artifact updates; cancel aborts the turn, its history stays valid).
* :func:`agui_run`: a session's turn as AG-UI runs (extra ``[agui]``): a run that waits for a
  person ends on the interrupt outcome, the next run's ``resume`` entries answer it and it goes
  on (:func:`agui_interrupts`: the waiting requests as AG-UI ``Interrupt`` s).
* The edge every app we serve sits behind (see ``docs/security.md``): :class:`EdgeGuard`
  (Host allowlist, cross-origin refusal, bearer tokens, JSON-only bounded bodies, nesting
  limit, lone surrogates replaced) under an :class:`EdgePolicy`; :class:`Principals` (tokens
  from the environment or a token file) and the :class:`Principal` a request speaks for
  (:func:`principal_of`), whose sessions and tasks are its own; :func:`read_json`.

The SDKs are imported on first use of a name that needs them.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports, publish
from ._client import AnswerShape, ClientHook, ClientTurn, answer_problem
from ._principals import (
    ANONYMOUS,
    LOOPBACK_NAMES,
    Principal,
    Principals,
    allowed_hosts_for,
    is_loopback,
)
from ._served import OnEvent, ServedAgent

if TYPE_CHECKING:
    from ._a2a import a2a_app, a2a_routes, agent_card
    from ._agui_runs import agui_interrupts, agui_run
    from ._edge import (
        EdgeGuard,
        EdgePolicy,
        ErrorShape,
        jsonrpc_error,
        parse_json_body,
        principal_of,
        read_json,
    )

__all__ = [
    "ANONYMOUS",
    "LOOPBACK_NAMES",
    "AnswerShape",
    "ClientHook",
    "ClientTurn",
    "EdgeGuard",
    "EdgePolicy",
    "ErrorShape",
    "OnEvent",
    "Principal",
    "Principals",
    "ServedAgent",
    "a2a_app",
    "a2a_routes",
    "agent_card",
    "agui_interrupts",
    "agui_run",
    "allowed_hosts_for",
    "answer_problem",
    "is_loopback",
    "jsonrpc_error",
    "parse_json_body",
    "principal_of",
    "read_json",
]

_EDGE = (
    "EdgeGuard",
    "EdgePolicy",
    "ErrorShape",
    "jsonrpc_error",
    "parse_json_body",
    "principal_of",
    "read_json",
)
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "a2a_app": "._a2a",
        "agui_interrupts": "._agui_runs",
        "agui_run": "._agui_runs",
        "a2a_routes": "._a2a",
        "agent_card": "._a2a",
        **dict.fromkeys(_EDGE, "._edge"),
    },
)

publish(__name__, __all__)
