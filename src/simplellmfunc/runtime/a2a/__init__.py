"""Remote A2A (Agent2Agent) agents as tools, on the official ``a2a-sdk`` (extra ``[a2a]``).

:class:`A2AAgentTool` / :func:`a2a_tool`: the model sends a task, the remote agent answers it;
its progress arrives as custom events (``a2a_status``, ``a2a_artifact``), the calling run's
abort cancels the remote task, and a remote that is down is an
:class:`~simplellmfunc.exceptions.A2AConnectionError`. Serving our agents over A2A is
:mod:`simplellmfunc.serving`.

The SDK is imported on first use of a name.
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from ._tool import A2AAgentTool, a2a_tool

__all__ = ["A2AAgentTool", "a2a_tool"]

__getattr__, __dir__ = lazy_exports(__name__, {"A2AAgentTool": "._tool", "a2a_tool": "._tool"})

publish(__name__, __all__)
