"""Runtime pieces for agents, one sub-package per concept.

* :mod:`.stores`: :class:`Store` with :class:`InMemoryStore`, :class:`SQLiteStore` and
  :class:`RedisStore` (TTL, LRU eviction, namespaces per agent and session), opened by name with
  :func:`open_store`; SQLite files go through :class:`SQLiteDatabase` (``simplellmfunc._persist``).
* :mod:`.memory`: :class:`MemoryHook` injects recent items into each LLM call and auto-saves
  steps (:class:`StepTriple`, :class:`KeyValueExtraction`, :class:`LLMSummary`).
* :mod:`.trace`: :class:`TraceRecorder` turns the event stream into :class:`TraceRecord` s, with
  :class:`JSONLSink` and :class:`SQLiteTraceSink`.
* :mod:`.checkpoints`: :class:`Checkpoint`, :class:`CheckpointManager`, :class:`CheckpointHook`.
* :mod:`.commands`: command lines as tools: :class:`ShellTool`, and :class:`CLIAgentTool` for
  agents calling agents, over :func:`run_command`.
* :mod:`.skills`: :class:`Skill` s from Agent Skills folders (``SKILL.md``) or :func:`skill`,
  a :class:`SkillRegistry` with search and discovery, :class:`Skills` (a registry as a toolkit
  item: ``load_skill`` on demand) and :func:`skill_agent`.
* :mod:`.durable` (the ``[durable]`` extra, imported on its own): durable runs on DBOS —
  :class:`~.durable.DurableAgent`, :class:`~.durable.DurableRuntime`, workers of a queue
  (:func:`~.durable.serve_queue`) and :class:`~.durable.DurableClient`.
* :mod:`.config`: agents from config files: :class:`AgentConfig` read by
  :func:`load_agent_config` (command line > environment > file > defaults), run once by
  :func:`run_config` (a :class:`ConfigRunResult`) or turn after turn by
  :class:`ConfiguredAgent`.

Imports between them run one way: ``config`` → ``checkpoints`` → ``trace`` / ``stores``;
``config`` → ``memory`` → ``stores``; ``config`` → ``commands``. A sub-package uses its siblings'
public names only.

Room is left for the packages that come next, each a sibling sub-package on the same terms:
``multiagent/`` (agent as tool, handoff, group chat, parallel runs, channels, shared memory),
``retrieval/`` (a store + retrieve tool),
``a2a/`` and ``serving/`` (agent card, client and server; HTTP serving).

``simplellmfunc.runtime.RunResult`` is a deprecated alias of :class:`ConfigRunResult` (the name
meant the engine's ``RunResult`` elsewhere).
"""

import warnings
from typing import Any

from .._persist import SQLiteDatabase
from .checkpoints import (
    Checkpoint,
    CheckpointHook,
    CheckpointInfo,
    CheckpointManager,
    load_checkpoint,
    save_checkpoint,
    serialize_value,
)
from .commands import CLIAgentTool, CommandOutput, ShellTool, run_command
from .config import (
    AgentConfig,
    ConfigRunResult,
    ConfiguredAgent,
    RunObserver,
    TurnResult,
    load_agent_config,
    run_config,
)
from .memory import (
    Action,
    AutoSave,
    KeyValueExtraction,
    LLMSummary,
    MemoryHook,
    Step,
    StepTriple,
    render_memory,
    strip_memory,
)
from .skills import Skill, SkillRegistry, Skills, skill, skill_agent
from .stores import (
    InMemoryStore,
    Namespace,
    RedisStore,
    ScopedStore,
    SQLiteStore,
    Store,
    StoreItem,
    StoreKind,
    open_store,
)
from .trace import (
    JSONLSink,
    SQLiteTraceSink,
    TraceRecord,
    TraceRecorder,
    TraceSink,
    TraceStats,
    read_jsonl,
)

__all__ = [
    "Action",
    "AgentConfig",
    "AutoSave",
    "CLIAgentTool",
    "Checkpoint",
    "CheckpointHook",
    "CheckpointInfo",
    "CheckpointManager",
    "CommandOutput",
    "ConfigRunResult",
    "ConfiguredAgent",
    "InMemoryStore",
    "JSONLSink",
    "KeyValueExtraction",
    "LLMSummary",
    "MemoryHook",
    "Namespace",
    "RedisStore",
    "RunObserver",
    "SQLiteDatabase",
    "SQLiteStore",
    "SQLiteTraceSink",
    "ScopedStore",
    "ShellTool",
    "Skill",
    "SkillRegistry",
    "Skills",
    "Step",
    "StepTriple",
    "Store",
    "StoreItem",
    "StoreKind",
    "TraceRecord",
    "TraceRecorder",
    "TraceSink",
    "TraceStats",
    "TurnResult",
    "load_agent_config",
    "load_checkpoint",
    "open_store",
    "read_jsonl",
    "render_memory",
    "run_command",
    "run_config",
    "save_checkpoint",
    "serialize_value",
    "skill",
    "skill_agent",
    "strip_memory",
]

_DEPRECATED = {"RunResult": ("ConfigRunResult", ConfigRunResult)}


def __getattr__(name: str) -> Any:
    """Deprecated aliases: warn, then return the renamed object."""
    if name in _DEPRECATED:
        new_name, value = _DEPRECATED[name]
        warnings.warn(
            f"simplellmfunc.runtime.{name} is deprecated; use {new_name} (the engine's RunResult "
            "is a different class)",
            DeprecationWarning,
            stacklevel=2,
        )
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
