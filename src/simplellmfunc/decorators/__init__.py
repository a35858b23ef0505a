"""The decorators: ``llm_function`` (a typed call, an :class:`LLMFunction`) and ``llm_chat``
(an agent with history, a :class:`ChatAgent`).

An agent also runs under other runs: :class:`AgentTool` (``agent.as_tool()``) makes it a tool
of another agent, :func:`agent_run` a sub-run streaming into a caller's events (what the
multi-agent runtime builds on). :data:`ToolkitItem` is what a ``toolkit`` holds;
:func:`static_tools` splits one into the tools known now and the providers asked at each call.
"""

from .._lazy import publish
from ._agent import AgentTool, ChatAgent, agent_run
from ._chat import llm_chat
from ._common import ToolkitItem, static_tools
from ._function import LLMFunction, llm_function

__all__ = [
    "AgentTool",
    "ChatAgent",
    "LLMFunction",
    "ToolkitItem",
    "agent_run",
    "llm_chat",
    "llm_function",
    "static_tools",
]

publish(__name__, __all__)
