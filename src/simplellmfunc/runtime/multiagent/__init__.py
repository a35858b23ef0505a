"""Multi-agent collaboration on the engine (seed 001 §17), in decorator style.

Every pattern works on ``@llm_chat`` agents; their runs are sub-runs of the team's run, so one
event stream (``team.stream(...)``) and one trace show every agent, each event tagged with its
agent's name (``origin.agent``) and depth (``origin.fork_depth``).

* Agent as tool: ``agent.as_tool(name, description)``
  (:class:`~simplellmfunc.decorators.AgentTool`).
* :class:`Handoff`: agents transfer the conversation with ``transfer_to_<name>`` tools;
  :class:`HandoffResult` says which agent answered and the path.
* :class:`GroupChat`: agents take turns in one conversation (round-robin, a selector function,
  or :class:`LLMSelector`); ends on max rounds, a keyword or a predicate.
* :class:`Parallel`: agents run concurrently under a limit; a failure is reported, an abort
  stops them all.
* :class:`Channel` / :class:`RedisChannel`: typed channels with timeouts and closing;
  :class:`SharedMemory`: a key-value memory with namespaces, on any store (Redis across
  processes).
"""

from ..._lazy import publish
from ._channel import Channel, ChannelRecord, RedisChannel
from ._group import (
    GroupChat,
    GroupChatResult,
    GroupChatState,
    GroupMessage,
    LLMSelector,
    SpeakerSelector,
)
from ._handoff import Handoff, HandoffResult, InputFilter, drop_tool_turns
from ._parallel import AgentOutcome, Parallel, ParallelResult
from ._shared import SharedMemory
from ._team import Team

__all__ = [
    "AgentOutcome",
    "Channel",
    "ChannelRecord",
    "GroupChat",
    "GroupChatResult",
    "GroupChatState",
    "GroupMessage",
    "Handoff",
    "HandoffResult",
    "InputFilter",
    "LLMSelector",
    "Parallel",
    "ParallelResult",
    "RedisChannel",
    "SharedMemory",
    "SpeakerSelector",
    "Team",
    "drop_tool_turns",
]

publish(__name__, __all__)
