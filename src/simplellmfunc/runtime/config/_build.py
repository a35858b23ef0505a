"""From config sections to live objects: the model, the tools, the memory, the trace recorder.

Each builder that opens something (a kernel, MCP servers, a store, trace files) enters it into
the caller's ``AsyncExitStack``, so everything an agent opened is closed, in reverse order, in
the task that opened it (MCP toolsets require that).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from ...engine import DEFAULT_SIGNALS, EngineOptions, HistoryWindow, TerminationPolicy
from ...exceptions import ConfigError
from ...providers import Capabilities, LLMInterface, env_settings, load_provider_json
from ..commands import CLIAgentTool, ShellTool
from ..memory import AutoSave, KeyValueExtraction, LLMSummary, MemoryHook, StepTriple
from ..skills import SkillRegistry, Skills
from ..stores import ScopedStore, open_store
from ..trace import JSONLSink, SQLiteTraceSink, TraceRecorder, TraceSink
from ._knowledge import KnowledgeConfig, MemoryConfig
from ._policies import HistoryConfig, TerminationConfig
from ._schema import AgentConfig, ModelConfig

__all__ = [
    "build_knowledge",
    "build_llm",
    "build_memory",
    "build_options",
    "build_recorder",
    "build_termination",
    "build_toolkit",
    "build_window",
]

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")


# --- the model ------------------------------------------------------------------------------


def _capabilities(base: Capabilities | None, overrides: Mapping[str, bool]) -> Capabilities:
    current = dataclasses.asdict(base or Capabilities())
    unknown = sorted(set(overrides) - set(current))
    if unknown:
        known = ", ".join(sorted(current))
        raise ConfigError(f"model.capabilities: unknown {unknown[0]!r} (known: {known})")
    return Capabilities(**{**current, **overrides})


def _keys_from(
    variable: str, environ: Mapping[str, str] | None, key: str = "model.api_key_env"
) -> list[str]:
    raw = env_settings(environ).get(variable, "")
    keys = [k.strip() for k in raw.split(",") if k.strip()]
    if not keys:
        raise ConfigError(f"{key}: the variable {variable} is not set")
    return keys


def _options(model: ModelConfig, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """Constructor arguments of the interface, from the section's overrides."""
    options: dict[str, Any] = dict(model.params)
    for name in ("temperature", "max_tokens", "timeout", "context_window", "base_url"):
        value = getattr(model, name)
        if value is not None:
            options[name] = value
    if model.api_key_env:
        options["api_key"] = _keys_from(model.api_key_env, environ)
    return options


def _from_preset(model: ModelConfig, environ: Mapping[str, str] | None) -> LLMInterface:
    from ...providers import PRESETS, make_llm

    spec = model.preset or ""
    options = _options(model, environ)
    if model.capabilities:
        preset = PRESETS.get(spec.partition(":")[0].strip().lower())
        options["capabilities"] = _capabilities(
            preset.capabilities if preset else None, model.capabilities
        )
    return make_llm(spec, environ=environ, **options)


def _from_file(model: ModelConfig, environ: Mapping[str, str] | None) -> LLMInterface:
    from ...providers import OpenAICompatible

    options = _options(model, environ)
    keys = options.pop("api_key", None)
    base_url = options.pop("base_url", None)
    if model.capabilities:
        options["capabilities"] = _capabilities(None, model.capabilities)
    wanted = (model.provider, model.model)

    def factory(entry_keys: Any, name: str, url: str, **kwargs: Any) -> Any:
        # Only the chosen entry becomes an interface (each one owns an HTTP client).
        if (kwargs.get("provider_name"), name) != wanted:
            return None
        return OpenAICompatible(keys or entry_keys, name, base_url or url, **{**kwargs, **options})

    # The section's validator guarantees provider_file, provider and model here.
    found = load_provider_json(factory, model.provider_file or "").get(model.provider or "", {})
    interface = found.get(model.model or "")
    if interface is None:
        known = ", ".join(sorted(found)) or "none"
        raise ConfigError(
            f"model: {model.provider_file} has no model {model.model!r} under "
            f"{model.provider!r} (models there: {known})"
        )
    return interface  # type: ignore[no-any-return]


def build_llm(model: ModelConfig, environ: Mapping[str, str] | None = None) -> LLMInterface:
    """The interface the section describes (a ``FallbackLLM`` when it has fallbacks).

    Raises:
        ConfigError: For an unknown provider, a missing key, or a missing provider.json entry.
    """
    primary = _from_preset(model, environ) if model.preset else _from_file(model, environ)
    if not model.fallback:
        return primary
    from ...providers import FallbackLLM

    return FallbackLLM([primary, *(build_llm(m, environ) for m in model.fallback)])


# --- tools ----------------------------------------------------------------------------------


async def build_toolkit(
    config: AgentConfig, stack: AsyncExitStack, environ: Mapping[str, str] | None = None
) -> list[Any]:
    """The toolkit: tools and tool providers (MCP servers), opened on ``stack``.

    Raises:
        ConfigError: For an invalid MCP configuration.
        SkillError: For an invalid skill folder.
        MCPError: When an MCP server cannot be started.
        KernelError: When the Python kernel cannot be started.
    """
    section = config.toolkit
    toolkit: list[Any] = []
    sandbox = config.sandbox
    policy = None if sandbox is None else sandbox.policy()
    shell_policy = policy if sandbox is not None and sandbox.shell else None
    if section.pyrepl is not None:
        from ...builtin import PyRepl

        options = section.pyrepl
        repl = PyRepl(
            working_directory=options.working_directory,
            sandbox=config.kernel_sandbox(),
            **options.repl_options(),
        )
        await stack.enter_async_context(repl)
        toolkit.extend(repl.toolset)
    if section.files is not None:
        from ...builtin import FileToolset

        toolkit.extend(FileToolset(section.files.workspace).toolset)
    if config.knowledge is not None:
        toolkit.append(await build_knowledge(config.knowledge, stack, environ))
    toolkit.extend(
        ShellTool(
            s.name,
            s.command,
            s.timeout,
            description=s.description,
            parameters=s.parameters,
            cwd=s.cwd,
            max_output_chars=s.max_output_chars,
            sandbox=shell_policy,
        )
        for s in section.shell
    )
    toolkit.extend(
        CLIAgentTool(
            a.command,
            name=a.name,
            description=a.description,
            timeout=a.timeout,
            output=a.output,
            cwd=a.cwd,
        )
        for a in section.agents
    )
    if section.a2a:
        from ..a2a import A2AAgentTool

        for a in section.a2a:
            remote = A2AAgentTool(
                a.url,
                name=a.name,
                description=a.description,
                token=env_settings(environ).get(a.token_env) if a.token_env else None,
                timeout=a.timeout,
                trusted_origins=a.trusted_origins,
            )
            stack.push_async_callback(remote.aclose)  # its HTTP client
            toolkit.append(remote)
    if section.mcpServers:
        from ...mcp import MCPServerGroup

        source = section.mcpServers
        mapping = {"mcpServers": source} if isinstance(source, dict) else source
        group = MCPServerGroup.from_config(
            mapping, prefix_names=section.mcp_prefix, timeout=section.mcp_timeout
        )
        await stack.enter_async_context(group)
        toolkit.append(group)
    skills = config.skills_section
    if skills.paths:
        toolkit.append(
            Skills(
                SkillRegistry(dirs=skills.paths),
                discover=skills.discover,
                max_skills=skills.max_skills,
                scripts=skills.scripts,
                script_timeout=skills.script_timeout,
            )
        )
    return toolkit


async def build_knowledge(
    section: KnowledgeConfig, stack: AsyncExitStack, environ: Mapping[str, str] | None = None
) -> Any:
    """The ``retrieve`` tool of the ``knowledge:`` section; its sources ingested, the knowledge
    base (and the embeddings client) closed with ``stack``.

    Raises:
        ConfigError: For a source that does not exist, or vectors that cannot be used here.
        ProviderError: When the embeddings endpoint fails.
    """
    from ...exceptions import UserError
    from ...providers import OpenAIEmbeddings
    from ..retrieval import create_rag

    embedder = None
    if (spec := section.embeddings) is not None:
        keys = None
        if spec.api_key_env:
            keys = _keys_from(spec.api_key_env, environ, "knowledge.embeddings.api_key_env")
        embedder = OpenAIEmbeddings(spec.model, spec.base_url, keys, dimensions=spec.dimensions)
        stack.push_async_callback(embedder.aclose)
    rag = create_rag(
        *section.sources,
        path=section.path or ":memory:",
        embedder=embedder,
        k=section.k,
        token_budget=section.token_budget,
        mode=section.mode,
        max_chunk_chars=section.max_chunk_chars,
        tool_name=section.tool_name,
    )
    try:
        await stack.enter_async_context(rag)
    except UserError as exc:
        raise ConfigError(f"knowledge: {exc}") from exc
    return rag.tool


# --- memory, trace, engine policies ---------------------------------------------------------


def _strategies(memory: MemoryConfig, llm: LLMInterface) -> list[AutoSave]:
    made: dict[str, AutoSave] = {}
    for name in memory.auto_save:
        if name == "step_triple":
            made[name] = StepTriple()
        elif name == "key_value":
            made[name] = KeyValueExtraction()
        else:
            made[name] = LLMSummary(llm)
    return list(made.values())


async def build_memory(
    config: AgentConfig, llm: LLMInterface, stack: AsyncExitStack
) -> tuple[ScopedStore, MemoryHook] | None:
    """The agent's namespaced memory and its hook (``None`` for ``store: none``).

    Raises:
        ConfigError: When the store cannot be used (never a silent fallback).
    """
    memory = config.memory
    if memory.store == "none":
        return None
    store = await open_store(
        memory.store,
        path=memory.path,
        url=memory.url,
        prefix=memory.prefix,
        max_items=memory.max_items,
        ttl=memory.ttl,
    )
    await stack.enter_async_context(store)
    scoped = store.scope(memory.agent or config.name, memory.session)
    hook = MemoryHook(
        scoped,
        recent=memory.recent,
        auto_save=_strategies(memory, llm),
        save_turns=memory.save_turns,
    )
    return scoped, hook


async def build_recorder(config: AgentConfig, stack: AsyncExitStack) -> TraceRecorder:
    """The trace recorder, with a JSONL or SQLite sink when ``trace.file`` is set.

    Raises:
        RunError: When the trace file cannot be opened.
    """
    sinks: list[TraceSink] = []
    file = config.trace.file
    if file:
        path = Path(file)  # the sinks create its folder
        is_sqlite = path.suffix.lower() in _SQLITE_SUFFIXES
        sinks.append(SQLiteTraceSink(path) if is_sqlite else JSONLSink(path))
    recorder = TraceRecorder(sinks=sinks, max_chars=config.trace.max_chars)
    return await stack.enter_async_context(recorder)


def build_options(config: AgentConfig, *, tools: bool) -> EngineOptions:
    """The engine options of an agent (``tools``: whether its model is offered any)."""
    limits = config.limits
    return EngineOptions(
        max_tool_calls=limits.max_steps - 1 if tools else None,
        tool_timeout=limits.tool_timeout,
        max_tool_concurrency=limits.max_tool_concurrency,
        tool_protocol=config.tool_protocol,
        keyword_heuristic=config.keyword_heuristic,
        termination=build_termination(config.termination),
        history_window=build_window(config.history),
        loop_window=limits.loop_window,
        observation_enabled=limits.observation_enabled,
    )


def build_termination(section: TerminationConfig) -> TerminationPolicy:
    """The termination policy of the section."""
    signals = tuple(section.signals) if section.signals is not None else DEFAULT_SIGNALS
    return TerminationPolicy(signals=signals, implicit=section.implicit)


def build_window(section: HistoryConfig) -> HistoryWindow:
    """The history window of the section."""
    return HistoryWindow(
        max_tokens=section.max_tokens,
        keep_recent_turns=section.keep_recent_turns,
        strategy=section.strategy,
        reserve_tokens=section.reserve_tokens,
    )
