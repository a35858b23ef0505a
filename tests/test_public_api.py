"""The public surface and import hygiene."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import simplellmfunc
import simplellmfunc.decorators
import simplellmfunc.engine
import simplellmfunc.evals
import simplellmfunc.events
import simplellmfunc.hooks
import simplellmfunc.providers
import simplellmfunc.runtime
import simplellmfunc.runtime.a2a
import simplellmfunc.runtime.checkpoints
import simplellmfunc.runtime.commands
import simplellmfunc.runtime.config
import simplellmfunc.runtime.memory
import simplellmfunc.runtime.multiagent
import simplellmfunc.runtime.retrieval
import simplellmfunc.runtime.skills
import simplellmfunc.runtime.stores
import simplellmfunc.runtime.trace
import simplellmfunc.sandbox
import simplellmfunc.serving
import simplellmfunc.testing
import simplellmfunc.tools
import simplellmfunc.types

EXPECTED_TOP = {
    "APIKeyPool",
    "AbortSignal",
    "AnthropicCompatible",
    "ApprovalDecision",
    "EngineOptions",
    "FallbackLLM",
    "FileToolset",
    "HistoryWindow",
    "MCPToolset",
    "OpenAIResponsesCompatible",
    "PauseSignal",
    "PyRepl",
    "ImgPath",
    "ImgUrl",
    "LLMInterface",
    "OpenAICompatible",
    "SelfReference",
    "TerminationPolicy",
    "Text",
    "TokenBucket",
    "Tool",
    "ToolEventEmitter",
    "app_log",
    "create_rag",
    "llm_chat",
    "llm_function",
    "make_llm",
    "tool",
    "tui",
}


PUBLIC_PACKAGES = [
    simplellmfunc,
    simplellmfunc.decorators,
    simplellmfunc.engine,
    simplellmfunc.evals,
    simplellmfunc.events,
    simplellmfunc.hooks,
    simplellmfunc.providers,
    simplellmfunc.runtime,
    simplellmfunc.runtime.checkpoints,
    simplellmfunc.runtime.commands,
    simplellmfunc.runtime.config,
    simplellmfunc.runtime.memory,
    simplellmfunc.runtime.retrieval,
    simplellmfunc.runtime.skills,
    simplellmfunc.runtime.multiagent,
    simplellmfunc.runtime.a2a,
    simplellmfunc.runtime.stores,
    simplellmfunc.runtime.trace,
    simplellmfunc.sandbox,
    simplellmfunc.testing,
    simplellmfunc.tools,
    simplellmfunc.types,
    simplellmfunc.serving,
]


@pytest.mark.parametrize("module", PUBLIC_PACKAGES)
def test_all_is_sorted_and_resolvable(module: object) -> None:
    names = list(module.__all__)  # type: ignore[attr-defined]
    # isort-style order, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
    assert names == sorted(
        names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n)
    )
    for name in names:
        assert getattr(module, name) is not None


def test_top_level_surface() -> None:
    assert set(simplellmfunc.__all__) == EXPECTED_TOP
    # the namespace holds the public names (and dunders, and the private _lazy module) only
    names = {
        n
        for n, v in vars(simplellmfunc).items()
        if not n.startswith("_") and not isinstance(v, type(simplellmfunc))  # not submodules
    }
    assert names <= EXPECTED_TOP
    for name in ("TYPE_CHECKING", "lazy_exports", "publish"):
        assert name not in vars(simplellmfunc), name


# ChatApp's annotations name what its module imports only for type checkers.
PRIVATE_PATH_KEPT = {"ChatApp"}


def test_exports_carry_their_public_path() -> None:
    """Reprs, tracebacks, docs and pickles show ``simplellmfunc.engine.Run``, not the private
    module it is defined in (as httpx does); annotations still resolve."""
    import inspect
    import pickle
    import typing

    for package in PUBLIC_PACKAGES:
        for name in package.__all__:
            value = getattr(package, name)
            if not (isinstance(value, type) or inspect.isfunction(value)):
                continue
            if name in PRIVATE_PATH_KEPT:
                continue
            parts = value.__module__.split(".")
            assert not any(p.startswith("_") for p in parts), f"{package.__name__}.{name}"
            typing.get_type_hints(value)  # resolves where __module__ now points
    assert repr(simplellmfunc.engine.Run).endswith("'simplellmfunc.engine.Run'>")
    assert simplellmfunc.types.Text.__module__ == "simplellmfunc.types"
    options = simplellmfunc.engine.EngineOptions(tool_timeout=3)
    assert pickle.loads(pickle.dumps(options)) == options


EXPECTED_SANDBOX = {
    "ALLOWED_ENV",
    "LIMIT_NAMES",
    "SEED_NAMES",
    "Isolation",
    "SandboxPolicy",
    "as_policy",
    "clean_environment",
    "import_paths",
    "isolation",
    "known_isolation",
    "kill_spawned",
    "marker_entry",
    "sandbox_argv",
    "usable",
    "warning_event",
}
EXPECTED_TOOLS = {
    "ApprovalFlag",
    "check_approval_flag",
    "ArgumentsError",
    "FunctionTool",
    "ParsedDocstring",
    "RenderedResult",
    "SandboxedTool",
    "TaskTool",
    "Tool",
    "ToolContext",
    "ToolEventEmitter",
    "ToolProvider",
    "check_tool_name",
    "parse_docstring",
    "render_error",
    "render_result",
    "render_result_async",
    "render_unknown_tool",
    "sandboxed",
    "tool",
}


def test_decorators_surface() -> None:
    """The decorators give values of public classes: an agent is a ChatAgent, a typed call an
    LLMFunction (nothing recognises them by their attributes)."""
    decorators = simplellmfunc.decorators
    assert set(decorators.__all__) == {
        "AgentTool",
        "ChatAgent",
        "LLMFunction",
        "ToolkitItem",
        "agent_run",
        "llm_chat",
        "llm_function",
        "static_tools",
    }
    for name in ("resume", "run", "as_tool", "prepare", "options", "name", "description"):
        assert hasattr(decorators.ChatAgent, name), name
    for name in ("run", "stream", "options"):
        assert hasattr(decorators.LLMFunction, name), name


def test_sandbox_and_tools_surface() -> None:
    assert set(simplellmfunc.sandbox.__all__) == EXPECTED_SANDBOX
    assert set(simplellmfunc.tools.__all__) == EXPECTED_TOOLS
    from simplellmfunc.exceptions import ResourceLimitExceeded, SandboxViolation

    assert ResourceLimitExceeded("x", limit="memory").limit == "memory"
    assert issubclass(SandboxViolation, simplellmfunc.exceptions.SimpleLLMFuncError)
    # Seed 001 §24.7's violations, under ResourceLimitExceeded.
    from simplellmfunc.exceptions import MemoryViolation, OutputViolation, TimeoutViolation

    for kind, limit in ((TimeoutViolation, "wall_time"), (MemoryViolation, "memory"),
                        (OutputViolation, "output")):  # fmt: skip
        assert issubclass(kind, ResourceLimitExceeded)
        assert kind("x").limit == limit


EXPECTED_ENGINE = {
    "ApprovalDecision",
    "ApprovalPolicy",
    "Approver",
    "answer_request",
    "parse_answer",
    "typed_decision",
    "APPROVAL_HELP",
    "DEFAULT_SIGNALS",
    "FINAL_ANSWER_INSTRUCTION",
    "HIDDEN_OBSERVATION",
    "STEP_REPLAYED",
    "SUMMARY_INSTRUCTION",
    "StepKind",
    "StepRunner",
    "StepSlot",
    "current_step_runner",
    "current_tool_call_id",
    "in_tool_call",
    "running_steps",
    "BatchResult",
    "DeferredTool",
    "Emitter",
    "EngineOptions",
    "Finished",
    "HistoryWindow",
    "IncompleteAnswerPolicy",
    "Invocation",
    "JSONProtocol",
    "NativeProtocol",
    "RawItem",
    "Run",
    "RunContext",
    "RunHook",
    "RunItem",
    "RunResult",
    "RunState",
    "RunView",
    "TerminationPolicy",
    "TextAction",
    "TextChunk",
    "TextProtocol",
    "ToolCallProtocol",
    "ToolProtocol",
    "answer_deferred",
    "apply_window",
    "compile_request",
    "current_run",
    "event_pump",
    "new_call_id",
    "parse_reply",
    "pending_calls",
    "pump_items",
    "render_catalogue",
    "resolve_protocol",
    "run_tool_batch",
    "split_options",
    "split_turns",
    "start_pump",
    "system_context",
}


def test_engine_surface() -> None:
    """The one run API both decorators, the builtins and the runtime build on."""
    assert set(simplellmfunc.engine.__all__) == EXPECTED_ENGINE
    assert simplellmfunc.EngineOptions is simplellmfunc.engine.EngineOptions
    # the pre-release names are gone
    assert not hasattr(simplellmfunc.engine, "ReactRun")
    assert not hasattr(simplellmfunc.engine, "run_react")


RUNTIME_PACKAGES = {
    "checkpoints": {
        "Checkpoint",
        "CheckpointHook",
        "CheckpointInfo",
        "CheckpointManager",
        "SharedState",
        "load_checkpoint",
        "load_context",
        "save_checkpoint",
        "save_context",
        "serialize_value",
    },
    "commands": {"CLIAgentTool", "CommandOutput", "ShellTool", "run_command"},
    "config": {
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
    },
    "memory": {
        "Action",
        "AutoSave",
        "KeyValueExtraction",
        "LLMSummary",
        "MemoryHook",
        "Step",
        "StepTriple",
        "render_memory",
        "strip_memory",
    },
    "retrieval": {
        "AGENTIC_PROMPT",
        "Chunk",
        "Embedder",
        "IngestReport",
        "KnowledgeBase",
        "OutputFormat",
        "Passage",
        "RAG",
        "SearchMode",
        "Skipped",
        "SourceInfo",
        "chunk_text",
        "create_rag",
        "format_passages",
        "retrieve_tool",
    },
    "skills": {
        "DEFAULT_SKILL_AGENT_PROMPT",
        "LOAD_SKILL",
        "SKILL_FILE",
        "DiscoverMode",
        "Skill",
        "SkillRegistry",
        "SkillSignature",
        "SkillStats",
        "Skills",
        "find_skill_folders",
        "loaded_skills",
        "read_skill_folder",
        "skill",
        "skill_agent",
    },
    "multiagent": {
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
    },
    "stores": {
        "InMemoryStore",
        "Namespace",
        "RedisStore",
        "SQLiteStore",
        "ScopedStore",
        "Store",
        "StoreItem",
        "StoreKind",
        "open_store",
    },
    "trace": {
        "JSONLSink",
        "SQLiteTraceSink",
        "TraceRecord",
        "TraceRecorder",
        "TraceSink",
        "TraceStats",
        "read_jsonl",
        "timeline",
    },
}
# What simplellmfunc.runtime re-exports from its sub-packages (the CLI helpers stay in theirs).
RUNTIME_ONLY_IN_SUBPACKAGE = {
    "Finding",
    # retrieval: the report's entry and the tool's output formats stay in the sub-package
    "OutputFormat",
    "Skipped",
    "build_llm",
    "build_options",
    # sessions: what a waiting turn asks, read by the fronts
    "asked_request_id",
    "pending_request_id",
    "wait_kind",
    "check_config",
    "timeline",
    # skills: the registry, the toolkit, the decorator and the agent are re-exported
    "DEFAULT_SKILL_AGENT_PROMPT",
    "LOAD_SKILL",
    "SKILL_FILE",
    "DiscoverMode",
    "SkillSignature",
    "SkillStats",
    "ChannelRecord",
    "SharedState",
    "load_context",
    "save_context",
    "find_skill_folders",
    "loaded_skills",
    "read_skill_folder",
    "ServeLimits",  # serving's limits: re-exported by simplellmfunc.serving
}


def test_runtime_surface() -> None:
    runtime = simplellmfunc.runtime
    for name, expected in RUNTIME_PACKAGES.items():
        package = getattr(runtime, name)
        assert set(package.__all__) == expected, name
        for export in expected - RUNTIME_ONLY_IN_SUBPACKAGE:
            assert getattr(runtime, export) is getattr(package, export), export
    flat = set().union(*RUNTIME_PACKAGES.values()) - RUNTIME_ONLY_IN_SUBPACKAGE
    assert set(runtime.__all__) == flat | {"SQLiteDatabase"}


def test_a2a_and_serving_surfaces() -> None:
    # Not re-exported flat from simplellmfunc.runtime: serving sits above runtime.
    assert set(simplellmfunc.runtime.a2a.__all__) == {"A2AAgentTool", "a2a_tool"}
    assert set(simplellmfunc.serving.__all__) == SERVING_SURFACE
    assert not {"serving", "sessions", "SessionStore"} & set(dir(simplellmfunc.runtime))


SERVING_SURFACE = {
    "wait_kind",
    "pending_request_id",
    "asked_request_id",
    "agui_run",
    "agui_interrupts",
    "AGUIAdapter",
    "AgentTurn",
    "ANONYMOUS",
    "AnswerShape",
    "CallableAgent",
    "ClientHook",
    "ClientTurn",
    "DrivenTurn",
    "EdgeGuard",
    "EdgePolicy",
    "LOOPBACK_NAMES",
    "OnDisconnect",
    "Principal",
    "Principals",
    "ServeLimits",
    "ServeSettings",
    "ServedAgent",
    "Session",
    "SessionAgent",
    "SessionStore",
    "TurnRequest",
    "WirePolicy",
    "a2a_app",
    "a2a_routes",
    "agent_card",
    "agui_resume_answers",
    "agui_sse_stream",
    "allowed_hosts_for",
    "create_app",
    "encode_sse",
    "is_loopback",
    "jsonable",
    "parse_json_body",
    "principal_of",
    "read_json",
    "running",
    "serve_app",
    "serve_config",
    "sse_stream",
    "to_wire",
    "web_chat_app",
    "web_chat_routes",
}


# Optional extras: their own sub-packages, imported on their own (not re-exported by runtime).
OPTIONAL_RUNTIME_PACKAGES = {
    "durable": (
        "dbos",
        {
            "DEFAULT_DATABASE_PATH",
            "RESUME_NOTE",
            "WORKFLOW_NAME",
            "DBOSStepRunner",
            "DurableAgent",
            "DurableClient",
            "DurableConfig",
            "DurableHandle",
            "DurableResult",
            "DurableRuntime",
            "QueueConfig",
            "serve_queue",
            "worker_id",
        },
    ),
    "otel": ("opentelemetry", {"GenAITracing", "TracedSteps"}),
}


@pytest.mark.parametrize("name", sorted(OPTIONAL_RUNTIME_PACKAGES))
def test_optional_runtime_surface(name: str) -> None:
    requirement, expected = OPTIONAL_RUNTIME_PACKAGES[name]
    pytest.importorskip(requirement, reason=f"runtime.{name} needs its extra")
    package = importlib.import_module(f"simplellmfunc.runtime.{name}")
    assert set(package.__all__) == expected
    assert name not in simplellmfunc.runtime.__all__


def test_pre_release_aliases_are_gone() -> None:
    with pytest.raises(ImportError):
        from simplellmfunc.runtime import RunResult  # noqa: F401 - the pre-release alias
    assert "RunResult" not in simplellmfunc.runtime.__all__


def test_seed_import_paths_exist() -> None:
    from simplellmfunc.hooks import (  # noqa: F401
        CustomEvent,
        EventYield,
        ReactEndEvent,
        ResponseYield,
        is_event_yield,
        is_response_yield,
    )
    from simplellmfunc.hooks.event_emitter import ToolEventEmitter  # noqa: F401
    from simplellmfunc.types import ImgPath, ImgUrl, Text  # noqa: F401


def _fresh(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )


def test_import_has_no_side_effects(tmp_path: Path) -> None:
    code = (
        "import sys, threading\n"
        "before = set(sys.modules)\n"
        "import simplellmfunc, simplellmfunc.hooks, simplellmfunc.types\n"
        "names = ('jupyter_client', 'mcp', 'tiktoken', 'ipykernel')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print(heavy, threading.active_count())\n"
    )
    result = _fresh(code, tmp_path)
    assert result.stdout.strip() == "[] 1"
    assert result.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_runtime_sub_packages_import_lazily(tmp_path: Path) -> None:
    """``import simplellmfunc.runtime.stores`` loads the stores and what they need (13 of our
    modules, 101 in all), not every runtime sub-package (127 of ours, 414 in all, before)."""
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import simplellmfunc.runtime.stores\n"
        "ours = sorted(m for m in set(sys.modules) - before if m.startswith('simplellmfunc'))\n"
        "print(len(ours))\n"
        "print(' '.join(ours))\n"
    )
    count, names = _fresh(code, tmp_path).stdout.strip().splitlines()
    loaded = set(names.split())
    assert int(count) <= 20, loaded
    for heavy in ("engine", "providers", "decorators", "runtime.config", "runtime.retrieval"):
        assert f"simplellmfunc.{heavy}" not in loaded, heavy
    # the flat names still work, imported on first access
    code = "import simplellmfunc.runtime as r\nprint(r.ConfiguredAgent.__module__, r.stores)\n"
    assert _fresh(code, tmp_path).stdout.split()[0] == "simplellmfunc.runtime.config"


def test_local_model_surface() -> None:
    import simplellmfunc.local

    assert {"LocalModel", "MODELS", "llama_server", "server_llm", "start", "status", "stop"} <= set(
        simplellmfunc.local.__all__
    )
    assert simplellmfunc.local.llama_server.__module__ == "simplellmfunc.local"
