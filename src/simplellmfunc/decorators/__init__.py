"""The decorators: ``llm_function`` (a typed call) and ``llm_chat`` (an agent with history).

An ``@llm_chat`` agent also runs under other runs: :class:`AgentTool` (``agent.as_tool()``)
makes it a tool of another agent, :func:`agent_run` a sub-run streaming into a caller's events
(what the multi-agent runtime builds on).
"""

from ._agent_tool import AgentTool, agent_description, agent_name, agent_run
from ._chat import llm_chat
from ._function import llm_function

__all__ = ["AgentTool", "agent_description", "agent_name", "agent_run", "llm_chat", "llm_function"]
