"""Runtime pieces for agents (seed 001): stores, agent memory, trace recorder, checkpoints.

* Stores: :class:`Store` with :class:`InMemoryStore`, :class:`SQLiteStore` and
  :class:`RedisStore` (TTL, LRU eviction, namespaces per agent and session), opened by name with
  :func:`open_store`; SQLite files go through :class:`SQLiteDatabase`.
* Memory: :class:`MemoryHook` injects recent items into each LLM call and auto-saves steps
  (:class:`StepTriple`, :class:`KeyValueExtraction`, :class:`LLMSummary`).
* Traces: :class:`TraceRecorder` turns the event stream into :class:`TraceRecord` s, with
  :class:`JSONLSink` and :class:`SQLiteTraceSink`.
* Checkpoints: :class:`Checkpoint`, :class:`CheckpointManager`, :class:`CheckpointHook`.
* Agents from config files: :class:`AgentConfig` read by :func:`load_agent_config`
  (command line > environment > file > defaults), run once by :func:`run_config` or turn after
  turn by :class:`ConfiguredAgent`.
* Command lines as tools: :class:`ShellTool`, and :class:`CLIAgentTool` for agents calling agents.
"""

from .._persist import SQLiteDatabase
from ._agent import ConfiguredAgent, RunObserver, TurnResult
from ._autosave import Action, AutoSave, KeyValueExtraction, LLMSummary, Step, StepTriple
from ._checkpoint import Checkpoint, serialize_value
from ._checkpoint_hook import CheckpointHook
from ._checkpoints import CheckpointInfo, CheckpointManager, load_checkpoint, save_checkpoint
from ._command import CommandOutput, run_command
from ._config import AgentConfig
from ._config_load import load_agent_config
from ._memory import MemoryHook, render_memory, strip_memory
from ._memory_store import InMemoryStore
from ._namespaces import Namespace
from ._open_store import StoreKind, open_store
from ._redis_store import RedisStore
from ._run import RunResult, run_config
from ._shell import CLIAgentTool, ShellTool
from ._sqlite_store import SQLiteStore
from ._stores import ScopedStore, Store, StoreItem
from ._trace import TraceRecorder
from ._trace_record import TraceRecord, TraceStats
from ._trace_sinks import JSONLSink, SQLiteTraceSink, TraceSink, read_jsonl

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
    "ConfiguredAgent",
    "InMemoryStore",
    "JSONLSink",
    "KeyValueExtraction",
    "LLMSummary",
    "MemoryHook",
    "Namespace",
    "RedisStore",
    "RunObserver",
    "RunResult",
    "SQLiteDatabase",
    "SQLiteStore",
    "SQLiteTraceSink",
    "ScopedStore",
    "ShellTool",
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
    "strip_memory",
]
