"""Command lines as tools: :class:`ShellTool`, and :class:`CLIAgentTool` for agents calling agents.

Both run through :func:`run_command` (a shell command in its own process group, with a
timeout, killed with its descendants when it ends or is cancelled).
"""

from ..._lazy import publish
from ._process import CommandOutput, run_command
from ._tools import CLIAgentTool, ShellTool

__all__ = ["CLIAgentTool", "CommandOutput", "ShellTool", "run_command"]

publish(__name__, __all__)
