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
* :mod:`.retrieval`: knowledge bases: :class:`KnowledgeBase` (files and folders chunked into
  one SQLite file, BM25 by FTS5, dense and hybrid with ``sqlite-vec``), the ``retrieve`` tool
  (:func:`retrieve_tool`) and :func:`create_rag` → :class:`RAG` (with an agentic answerer).
* :mod:`.skills`: :class:`Skill` s from Agent Skills folders (``SKILL.md``) or :func:`skill`,
  a :class:`SkillRegistry` with search and discovery, :class:`Skills` (a registry as a toolkit
  item: ``load_skill`` on demand) and :func:`skill_agent`.
* :mod:`.multiagent`: agents working together: :class:`Handoff`, :class:`GroupChat`,
  :class:`Parallel`, :class:`Channel` / :class:`RedisChannel` and :class:`SharedMemory`.
* :mod:`.durable` (the ``[durable]`` extra, imported on its own): durable runs on DBOS —
  :class:`~.durable.DurableAgent`, :class:`~.durable.DurableRuntime`, workers of a queue
  (:func:`~.durable.serve_queue`) and :class:`~.durable.DurableClient`.
* :mod:`.config`: agents from config files: :class:`AgentConfig` read by
  :func:`load_agent_config` (command line > environment > file > defaults), run once by
  :func:`run_config` (a :class:`ConfigRunResult`) or turn after turn by
  :class:`ConfiguredAgent`.

Imports between them run one way: ``config`` → ``checkpoints`` → ``trace`` / ``stores``;
``config`` → ``memory`` → ``stores``; ``config`` → ``commands``; ``config`` →
``retrieval``. A sub-package uses its siblings' public names only.

Each name is imported on first access: ``import simplellmfunc.runtime.stores`` loads the stores
and what they need, not the knowledge bases, the config runtime or the multi-agent patterns.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
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
    from .multiagent import (
        AgentOutcome,
        Channel,
        GroupChat,
        GroupChatResult,
        GroupChatState,
        GroupMessage,
        Handoff,
        HandoffResult,
        InputFilter,
        LLMSelector,
        Parallel,
        ParallelResult,
        RedisChannel,
        SharedMemory,
        SpeakerSelector,
        Team,
        drop_tool_turns,
    )
    from .retrieval import (
        AGENTIC_PROMPT,
        RAG,
        Chunk,
        Embedder,
        IngestReport,
        KnowledgeBase,
        Passage,
        SearchMode,
        SourceInfo,
        chunk_text,
        create_rag,
        format_passages,
        retrieve_tool,
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
    "AGENTIC_PROMPT",
    "RAG",
    "Action",
    "AgentConfig",
    "AgentOutcome",
    "AutoSave",
    "CLIAgentTool",
    "Channel",
    "Checkpoint",
    "CheckpointHook",
    "CheckpointInfo",
    "CheckpointManager",
    "Chunk",
    "CommandOutput",
    "ConfigRunResult",
    "ConfiguredAgent",
    "Embedder",
    "GroupChat",
    "GroupChatResult",
    "GroupChatState",
    "GroupMessage",
    "Handoff",
    "HandoffResult",
    "InMemoryStore",
    "IngestReport",
    "InputFilter",
    "JSONLSink",
    "KeyValueExtraction",
    "KnowledgeBase",
    "LLMSelector",
    "LLMSummary",
    "MemoryHook",
    "Namespace",
    "Parallel",
    "ParallelResult",
    "Passage",
    "RedisChannel",
    "RedisStore",
    "RunObserver",
    "SQLiteDatabase",
    "SQLiteStore",
    "SQLiteTraceSink",
    "ScopedStore",
    "SearchMode",
    "SharedMemory",
    "ShellTool",
    "Skill",
    "SkillRegistry",
    "Skills",
    "SourceInfo",
    "SpeakerSelector",
    "Step",
    "StepTriple",
    "Store",
    "StoreItem",
    "StoreKind",
    "Team",
    "TraceRecord",
    "TraceRecorder",
    "TraceSink",
    "TraceStats",
    "TurnResult",
    "chunk_text",
    "create_rag",
    "drop_tool_turns",
    "format_passages",
    "load_agent_config",
    "load_checkpoint",
    "open_store",
    "read_jsonl",
    "render_memory",
    "retrieve_tool",
    "run_command",
    "run_config",
    "save_checkpoint",
    "serialize_value",
    "skill",
    "skill_agent",
    "strip_memory",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AGENTIC_PROMPT": ".retrieval",
        "RAG": ".retrieval",
        "Action": ".memory",
        "AgentConfig": ".config",
        "AgentOutcome": ".multiagent",
        "AutoSave": ".memory",
        "CLIAgentTool": ".commands",
        "Channel": ".multiagent",
        "Checkpoint": ".checkpoints",
        "CheckpointHook": ".checkpoints",
        "CheckpointInfo": ".checkpoints",
        "CheckpointManager": ".checkpoints",
        "Chunk": ".retrieval",
        "CommandOutput": ".commands",
        "ConfigRunResult": ".config",
        "ConfiguredAgent": ".config",
        "Embedder": ".retrieval",
        "GroupChat": ".multiagent",
        "GroupChatResult": ".multiagent",
        "GroupChatState": ".multiagent",
        "GroupMessage": ".multiagent",
        "Handoff": ".multiagent",
        "HandoffResult": ".multiagent",
        "InMemoryStore": ".stores",
        "IngestReport": ".retrieval",
        "InputFilter": ".multiagent",
        "JSONLSink": ".trace",
        "KeyValueExtraction": ".memory",
        "KnowledgeBase": ".retrieval",
        "LLMSelector": ".multiagent",
        "LLMSummary": ".memory",
        "MemoryHook": ".memory",
        "Namespace": ".stores",
        "Parallel": ".multiagent",
        "ParallelResult": ".multiagent",
        "Passage": ".retrieval",
        "RedisChannel": ".multiagent",
        "RedisStore": ".stores",
        "RunObserver": ".config",
        "SQLiteDatabase": ".._persist",
        "SQLiteStore": ".stores",
        "SQLiteTraceSink": ".trace",
        "ScopedStore": ".stores",
        "SearchMode": ".retrieval",
        "SharedMemory": ".multiagent",
        "ShellTool": ".commands",
        "Skill": ".skills",
        "SkillRegistry": ".skills",
        "Skills": ".skills",
        "SourceInfo": ".retrieval",
        "SpeakerSelector": ".multiagent",
        "Step": ".memory",
        "StepTriple": ".memory",
        "Store": ".stores",
        "StoreItem": ".stores",
        "StoreKind": ".stores",
        "Team": ".multiagent",
        "TraceRecord": ".trace",
        "TraceRecorder": ".trace",
        "TraceSink": ".trace",
        "TraceStats": ".trace",
        "TurnResult": ".config",
        "chunk_text": ".retrieval",
        "create_rag": ".retrieval",
        "drop_tool_turns": ".multiagent",
        "format_passages": ".retrieval",
        "load_agent_config": ".config",
        "load_checkpoint": ".checkpoints",
        "open_store": ".stores",
        "read_jsonl": ".trace",
        "render_memory": ".memory",
        "retrieve_tool": ".retrieval",
        "run_command": ".commands",
        "run_config": ".config",
        "save_checkpoint": ".checkpoints",
        "serialize_value": ".checkpoints",
        "skill": ".skills",
        "skill_agent": ".skills",
        "strip_memory": ".memory",
    },
    claims=("simplellmfunc._persist",),
    submodules=(
        "a2a",
        "checkpoints",
        "commands",
        "config",
        "durable",
        "memory",
        "multiagent",
        "otel",
        "retrieval",
        "skills",
        "stores",
        "trace",
    ),
)
