"""A2A (Agent2Agent) on the official ``a2a-sdk`` (extra ``[a2a]``): agents served to, and
called from, agents elsewhere.

* :class:`ServedAgent`: an ``@llm_chat`` agent or an open ``ConfiguredAgent`` answering remote
  callers: a history per session, limits on sessions and running turns, abort by session,
  graceful close (shared with ``simplellmfunc serve``).
* :func:`a2a_app` / :func:`a2a_routes` / :func:`agent_card`: the agent as an A2A server
  (agent card at the well-known path, message send and stream, task get and cancel; our events
  become task status and artifact updates; cancel aborts the turn, its history stays valid).
* :class:`A2AAgentTool` / :func:`a2a_tool`: a remote A2A agent as a tool, its progress as
  custom events, :class:`~simplellmfunc.exceptions.A2AConnectionError` when it is down.

The SDK is imported on first use of a name that needs it.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports
from ._served import OnEvent, ServedAgent

if TYPE_CHECKING:
    from ._server import a2a_app, a2a_routes, agent_card
    from ._tool import A2AAgentTool, a2a_tool

__all__ = [
    "A2AAgentTool",
    "OnEvent",
    "ServedAgent",
    "a2a_app",
    "a2a_routes",
    "a2a_tool",
    "agent_card",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "A2AAgentTool": "._tool",
        "a2a_tool": "._tool",
        "a2a_app": "._server",
        "a2a_routes": "._server",
        "agent_card": "._server",
    },
)
