"""Agents from config files.

:class:`AgentConfig` is read by :func:`load_agent_config` (command line > environment > file >
defaults, every problem reported with its key and line); :class:`ConfiguredAgent` builds the
agent it describes (model, toolkit, memory, trace, checkpoints) and runs it turn after turn;
:func:`run_config` runs it once and returns a :class:`ConfigRunResult`. :func:`build_llm` makes
the model interface of a config's ``model`` section, :func:`build_options` the engine options of a
config. :func:`check_config` checks offline what a config needs (commands, scripts, folders,
keys) and says what it could not check (``simplellmfunc validate``).
"""

from ..._lazy import publish
from ._agent import ConfiguredAgent, RunObserver, TurnResult
from ._build import build_llm, build_options
from ._check import Finding, check_config
from ._limits import ServeLimits
from ._load import load_agent_config
from ._run import ConfigRunResult, run_config
from ._schema import AgentConfig

__all__ = [
    "AgentConfig",
    "ConfigRunResult",
    "ConfiguredAgent",
    "Finding",
    "RunObserver",
    "ServeLimits",
    "TurnResult",
    "build_llm",
    "build_options",
    "check_config",
    "load_agent_config",
    "run_config",
]

publish(__name__, __all__)
