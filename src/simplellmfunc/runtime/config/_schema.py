"""The agent config: what a YAML / TOML / JSON agent file may say, validated by pydantic.

A minimal file::

    model: deepseek:deepseek-chat
    system: You are a helpful assistant.

Every section, with its defaults, is a model below; the shipped ``examples/agents/*.yml``
show them in use. Shorthands are accepted and normalised before validation (see
:func:`~._shapes.normalize`): ``model: "provider:model"``, ``pyrepl: true``,
``files: ./workspace``, chain steps as plain strings. Reading the files, the precedence of
command line > environment > file > defaults and the error messages with lines live in
:mod:`._file` and :mod:`._precedence`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ...sandbox import SandboxPolicy
from ._limits import DEFAULT_LIMITS, ServeLimits

__all__ = [
    "AgentConfig",
    "AgentToolConfig",
    "ChainStep",
    "CheckpointConfig",
    "EmbeddingsConfig",
    "FilesConfig",
    "GroupConfig",
    "HistoryConfig",
    "KnowledgeConfig",
    "LimitsConfig",
    "MemoryConfig",
    "ModelConfig",
    "ParallelConfig",
    "PyReplConfig",
    "SandboxConfig",
    "ShellToolConfig",
    "TerminationConfig",
    "ToolkitConfig",
    "TraceConfig",
]

Positive = Annotated[float, Field(gt=0)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Section):
    """Which model answers: a preset spec, or an entry of a ``provider.json`` file.

    Attributes:
        preset: ``"<provider>:<model>"`` of a known preset, e.g. ``"deepseek:deepseek-chat"``
            (the key comes from the preset's variable, e.g. ``DEEPSEEK_API_KEY``).
        provider_file: A ``provider.json`` file; with ``provider`` and ``model`` naming the entry.
        provider: The provider of that entry.
        model: The model of that entry.
        base_url: Another API root than the preset's or the entry's.
        api_key_env: An environment variable holding the key(s) (comma-separated for several),
            used instead of the preset's; the key itself never goes in the file.
        temperature: Sampling temperature of every call.
        max_tokens: Reply token cap of every call.
        params: Further body parameters of every call.
        timeout: Per-call deadline in seconds.
        context_window: The model's context window in tokens (for the history window).
        capabilities: What the server supports (``streaming_with_tools``, ``json_schema`` ...),
            over the preset's.
        fallback: Models tried in order when this one is unavailable.
    """

    preset: str | None = None
    provider_file: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    params: dict[str, Any] = {}
    timeout: Positive | None = None
    context_window: Annotated[int, Field(ge=1)] | None = None
    capabilities: dict[str, bool] = {}
    fallback: list[ModelConfig] = []

    @model_validator(mode="after")
    def _one_source(self) -> ModelConfig:
        if self.preset is None and self.provider_file is None:
            raise ValueError("name a model: 'preset' ('provider:model') or 'provider_file'")
        if self.preset is not None and self.provider_file is not None:
            raise ValueError("give either 'preset' or 'provider_file', not both")
        if self.provider_file is not None and (not self.provider or not self.model):
            raise ValueError("'provider_file' needs 'provider' and 'model'")
        return self


class PyReplConfig(_Section):
    """A Python kernel (``PyRepl``) as tools (``execute_code``, ``reset_repl`` ...)."""

    working_directory: str | None = None
    timeout: Positive = 120.0
    memory_limit_mb: Annotated[int, Field(ge=16)] | None = None
    max_output_tokens: Annotated[int, Field(ge=100)] = 20_000

    def repl_options(self) -> dict[str, Any]:
        """The keyword arguments of ``PyRepl`` besides the working directory."""
        return {
            "execution_timeout_seconds": self.timeout,
            "memory_limit_mb": self.memory_limit_mb,
            "max_output_tokens": self.max_output_tokens,
        }


class FilesConfig(_Section):
    """Workspace file tools (``FileToolset``): read, grep, sed, write inside ``workspace``."""

    workspace: str = "."


class ShellToolConfig(_Section):
    """A shell command as a tool (see ``commands.ShellTool``); a first word ``python`` or
    ``python3`` means the Python running the agent."""

    name: ToolName
    command: Annotated[str, Field(min_length=1)]
    timeout: Positive = 30.0
    description: str | None = None
    parameters: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] | None = None
    cwd: str | None = None
    max_output_chars: Annotated[int, Field(ge=1)] = 20_000


class AgentToolConfig(_Section):
    """Another agent (any command reading stdin) as a tool (see ``commands.CLIAgentTool``); a
    first word ``python`` or ``python3`` means the Python running the agent."""

    name: ToolName
    command: Annotated[str, Field(min_length=1)]
    description: str | None = None
    timeout: Positive = 300.0
    output: Literal["text", "json"] = "text"
    cwd: str | None = None


class A2AToolConfig(_Section):
    """A remote A2A agent as a tool (see ``runtime.a2a.A2AAgentTool``)."""

    url: Annotated[str, Field(pattern=r"^https?://")]
    name: ToolName
    description: str | None = None
    token_env: str | None = None
    timeout: Positive | None = None
    #: Origins besides ``url``'s that the card may name and that get the token.
    trusted_origins: list[str] = []


class ToolkitConfig(_Section):
    """The agent's tools.

    Attributes:
        pyrepl: A Python kernel (``true`` or options).
        files: Workspace file tools (``true``, a directory, or options).
        mcpServers: MCP servers in the common ``{"name": {command, args, env} | {url}}`` shape,
            or the path of a JSON file holding ``{"mcpServers": ...}``. A stdio server runs in
            the config file's folder unless it says ``cwd``. ``command: python`` (or
            ``python3``) means the Python running the agent, so a server script finds the
            project's packages; write a path to use another interpreter.
        mcp_prefix: Put the server name before each MCP tool name (``demo_get_sum``).
        mcp_timeout: Per-call timeout of MCP tools, in seconds.
        shell: Shell command tools.
        agents: Agents (commands) as tools.
        a2a: Remote A2A agents as tools (``url``, ``name``, ``description``, ``token_env``:
            the variable holding its bearer token, ``timeout``).
    """

    pyrepl: PyReplConfig | None = None
    files: FilesConfig | None = None
    mcpServers: dict[str, dict[str, Any]] | str = {}
    mcp_prefix: bool = True
    mcp_timeout: Positive | None = 60.0
    shell: list[ShellToolConfig] = []
    agents: list[AgentToolConfig] = []
    a2a: list[A2AToolConfig] = []

    def is_empty(self) -> bool:
        """Whether no tool is configured."""
        return not (
            self.pyrepl or self.files or self.mcpServers or self.shell or self.agents or self.a2a
        )


class EmbeddingsConfig(_Section):
    """An OpenAI-compatible ``/embeddings`` endpoint (llama.cpp ``--embedding``, OpenAI ...).

    Attributes:
        model: The embedding model.
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``.
        api_key_env: The environment variable holding the key (none for a local server).
        dimensions: Ask for vectors of this size (OpenAI's ``dimensions``).
    """

    model: Annotated[str, Field(min_length=1)]
    base_url: Annotated[str, Field(min_length=1)]
    api_key_env: str | None = None
    dimensions: Annotated[int, Field(ge=1)] | None = None


class KnowledgeConfig(_Section):
    """A knowledge base the agent searches with a ``retrieve`` tool (``runtime.retrieval``).

    Attributes:
        sources: Files and folders to ingest when the agent starts (only what changed since
            the last time is read again; files gone from a folder are removed).
        path: The knowledge base file (SQLite); default: in memory, rebuilt each start.
        k: Passages per search.
        token_budget: Most tokens of one ``retrieve`` result.
        mode: ``bm25``, ``dense`` or ``hybrid`` (default: hybrid with embeddings, else BM25).
        embeddings: Vectors for dense and hybrid search (needs the ``[rag]`` extra).
        tool_name: The tool's name.
        max_chunk_chars: Target passage size.
    """

    sources: list[Annotated[str, Field(min_length=1)]] = []
    path: str | None = None
    k: Annotated[int, Field(ge=1, le=20)] = 5
    token_budget: Annotated[int, Field(ge=50)] = 1500
    mode: Literal["bm25", "dense", "hybrid"] | None = None
    embeddings: EmbeddingsConfig | None = None
    tool_name: ToolName = "retrieve"
    max_chunk_chars: Annotated[int, Field(ge=100)] = 1500


_POLICY = SandboxPolicy()
Count = Annotated[int, Field(ge=1)]


class SandboxConfig(_Section):
    """The sandbox of the agent's Python kernel and shell tools (a
    :class:`~simplellmfunc.sandbox.SandboxPolicy`; see ``docs/sandbox.md``).

    ``sandbox: true`` is the default policy for both; ``sandbox: false`` runs the kernel
    unsandboxed. Without the section, the kernel has the default policy and shell tools none.
    Agent tools (``toolkit.agents``) are never sandboxed by it: they usually call a model.

    Attributes:
        enabled: ``false``: no sandbox for the kernel or the shell tools.
        shell: Also run the shell tools under the policy.
        network: Share the host's network.
        read_only: Extra host paths visible read-only (relative to the config file).
        writable: Extra host paths visible read-write.
        memory_mb: Address-space limit per process, in MiB (``null``: none).
        cpu_seconds: CPU-time limit per process.
        max_processes: How many processes and threads the sandbox may add.
        max_open_files: Open files per process.
        max_file_size_mb: Largest file a process may write, in MiB.
        timeout_seconds: Wall-clock limit of one shell command.
        env: Host environment variables passed in (secrets never pass unless named).
        require_isolation: Refuse to run where bubblewrap cannot (``true``), accept the
            fallback (``false``), or decide as ``SandboxPolicy`` does (unset: required as root
            and when subprocesses are forbidden).
    """

    enabled: bool = True
    shell: bool = True
    network: bool = _POLICY.network
    read_only: list[Annotated[str, Field(min_length=1)]] = []
    writable: list[Annotated[str, Field(min_length=1)]] = []
    memory_mb: Count | None = _POLICY.memory_mb
    cpu_seconds: Count | None = _POLICY.cpu_seconds
    max_processes: Count | None = _POLICY.max_processes
    max_open_files: Count | None = _POLICY.max_open_files
    max_file_size_mb: Annotated[int, Field(ge=0)] | None = _POLICY.max_file_size_mb
    timeout_seconds: Positive | None = _POLICY.timeout_seconds
    env: list[Annotated[str, Field(min_length=1)]] = []
    require_isolation: bool | None = _POLICY.require_isolation

    def policy(self) -> SandboxPolicy | None:
        """The policy (None when ``enabled`` is false)."""
        if not self.enabled:
            return None
        return SandboxPolicy.from_dict(self.model_dump(exclude={"enabled", "shell"}))


class SkillsConfig(_Section):
    """Skills (Agent Skills folders); ``skills: [dir, ...]`` is short for ``{paths: [...]}``.

    Attributes:
        paths: Folders holding skill folders (or one skill folder each).
        discover: Load skills chosen for each message before the model answers: ``search``
            (word search), ``llm`` (one call of the agent's model) or ``off``.
        max_skills: How many skills discovery loads at most.
        scripts: Let the model run the skills' scripts (``run_skill_script``).
        script_timeout: Seconds before a script is killed.
    """

    paths: list[Annotated[str, Field(min_length=1)]] = []
    discover: Literal["off", "search", "llm"] = "off"
    max_skills: Annotated[int, Field(ge=1)] = 3
    scripts: bool = False
    script_timeout: Positive = 60.0


class MemoryConfig(_Section):
    """Agent memory: a store, its namespace, and what is saved.

    Attributes:
        store: ``none`` (no memory), ``memory`` (this process; ``local``, the seed's name,
            is the same), ``sqlite`` (a file; needs
            ``path``) or ``redis`` (several processes; needs ``url``).
        path: The SQLite file.
        url: The Redis URL.
        prefix: The Redis key prefix.
        agent: The namespace's agent name (default: the config's ``name``).
        session: The namespace's session name.
        recent: How many of the newest items each LLM call sees.
        ttl: Seconds an item lives (``null``: forever).
        max_items: Most items kept (least recently used go first).
        auto_save: Strategies run after each tool batch and answered turn.
        save_turns: Also save answered turns (what the user said, what the agent answered).
    """

    store: Literal["none", "memory", "local", "sqlite", "redis"] = "none"
    path: str | None = None
    url: str | None = None
    prefix: str = "simplellmfunc"
    agent: Name | None = None
    session: Name = "default"
    recent: Annotated[int, Field(ge=0)] = 5
    ttl: Positive | None = None
    max_items: Annotated[int, Field(ge=1)] | None = None
    auto_save: list[Literal["step_triple", "key_value", "llm_summary"]] = ["step_triple"]
    save_turns: bool = True


class LimitsConfig(_Section):
    """Limits of one run.

    Attributes:
        max_steps: Most LLM calls of a run (the last one is asked for a final answer).
        tool_timeout: Default per-tool timeout in seconds (``null``: none).
        max_tool_concurrency: Most tools of one batch running at once.
        loop_window: Tool batches in a row that repeat (or alternate) before the model is
            warned and then stopped (``0``: off).
        max_handoffs: Most transfers in one run of a ``handoffs:`` graph (the entry agent's
            value counts); the agent in charge after the last one gets no transfer tools.
        observation_enabled: Show the model its tools' results (seed 001 §3.2 / §10's
            ``react.observation_enabled``); ``false``: it is told each tool ran, not what it
            returned.
    """

    max_steps: Annotated[int, Field(ge=1)] = 10
    tool_timeout: Positive | None = 30.0
    max_tool_concurrency: Annotated[int, Field(ge=1)] | None = None
    loop_window: Annotated[int, Field(ge=0)] = 3
    max_handoffs: Annotated[int, Field(ge=0)] = 5
    observation_enabled: bool = True


class TerminationConfig(_Section):
    """When a run stops besides "no tool calls".

    Attributes:
        signals: Implicit termination phrases (``null``: the built-in list).
        implicit: Use them: ``true`` / ``false``, or ``null`` for "with the text protocol only".
    """

    signals: list[Annotated[str, Field(min_length=1)]] | None = None
    implicit: bool | None = None


class HistoryConfig(_Section):
    """The history window: what of a long conversation is sent."""

    max_tokens: Annotated[int, Field(ge=1)] | None = None
    keep_recent_turns: Annotated[int, Field(ge=1)] = 20
    strategy: Literal["truncate", "summarize"] = "truncate"
    reserve_tokens: Annotated[int, Field(ge=0)] = 4096


class TraceConfig(_Section):
    """The trace of a run.

    Attributes:
        timeline: Print the step timeline after each run (``--trace``).
        file: Also write every record to this file: ``.jsonl`` (JSON lines) or ``.db`` /
            ``.sqlite`` (SQLite).
        max_chars: Longest input / output kept per record.
    """

    timeline: bool = False
    file: str | None = None
    max_chars: Annotated[int, Field(ge=20)] = 500


class CheckpointConfig(_Section):
    """Checkpoints: ``:save`` / ``:load`` in the REPL, and saves every N steps.

    Attributes:
        dir: Where the checkpoint files go (needed for any checkpoint).
        every: Save after every N-th iteration with tool calls (``0``: only on request).
        max: How many checkpoint files to keep.
    """

    dir: str | None = None
    every: Annotated[int, Field(ge=0)] = 0
    max: Annotated[int, Field(ge=1)] = 10


class DurableQueueConfig(_Section):
    """A queue of agent sessions (``simplellmfunc worker CONFIG --queue NAME``).

    Attributes:
        concurrency: Sessions running at once across all workers.
        worker_concurrency: Sessions running at once in one worker.
        rate_limit: Sessions started per ``rate_period`` seconds, across all workers.
        rate_period: The period of ``rate_limit`` in seconds.
        polling_interval: How often a worker looks for sessions, in seconds.
    """

    concurrency: Annotated[int, Field(ge=1)] | None = None
    worker_concurrency: Annotated[int, Field(ge=1)] | None = None
    rate_limit: Annotated[int, Field(ge=1)] | None = None
    rate_period: Positive = 1.0
    polling_interval: Positive = 1.0


class DurableSection(_Section):
    """Durable runs on DBOS (the ``[durable]`` extra): where runs are recorded, the queues.

    Attributes:
        database_url: ``postgresql://...`` for several processes or machines (``null``: a
            SQLite file at ``path``).
        path: The SQLite file.
        executor_id: This process's id for recovery (a worker's default: ``host-pid``).
        app_version: Workers run only sessions recorded under their version.
        resume_note: Tell the model when a run resumed in a new process.
        queues: Queues by name.
        heartbeat: Seconds between a worker's liveness beats.
        dead_after: A worker silent this long is dead: its sessions go to the others.
    """

    database_url: str | None = None
    path: str = ".simplellmfunc/durable.sqlite"
    executor_id: Name | None = None
    app_version: str | None = None
    resume_note: bool = True
    queues: dict[Name, DurableQueueConfig] = {}
    heartbeat: Positive = 5.0
    dead_after: Positive = 30.0


class ChainStep(_Section):
    """One stage of a chain: ``prompt`` with ``{input}`` (the previous stage's output)."""

    prompt: Annotated[str, Field(min_length=1)]
    name: str | None = None
    system: str | None = None


class GroupConfig(_Section):
    """How a ``group`` agent's members talk (see ``multiagent.GroupChat``).

    Attributes:
        speaker: ``round_robin``, ``random``, or ``llm`` (this config's model picks the next
            speaker).
        max_rounds: Most member messages.
        stop_keywords: A message containing one ends the chat.
    """

    speaker: Literal["round_robin", "random", "llm"] = "round_robin"
    max_rounds: Annotated[int, Field(ge=1)] = 10
    stop_keywords: list[Annotated[str, Field(min_length=1)]] = ["CONSENSUS", "DONE", "TERMINATE"]


class ParallelConfig(_Section):
    """How a ``parallel`` agent runs its members (see ``multiagent.Parallel``).

    Attributes:
        limit: Most members running at once (``None``: all).
        timeout: Seconds each member may take (``None``: no limit); a member past it is
            reported as failed, the others still answer.
    """

    limit: Annotated[int, Field(ge=1)] | None = None
    timeout: Positive | None = None


class ServeConfig(_Section):
    """How ``simplellmfunc serve`` serves the agent (command-line options win).

    Attributes:
        host: The address to listen on (loopback by default).
        port: The port.
        token_env: The environment variable holding the bearer token.
        token_file: A file of ``PRINCIPAL TOKEN`` lines: several principals, each with
            sessions and A2A tasks of its own (instead of ``token_env``).
        allowed_hosts: The ``Host`` names clients use, when not bound to loopback (``"*"``:
            any); the loopback names are always answered on loopback.
        allowed_origins: Browser origins besides the server's own that may post to it.
        max_body_bytes: Largest request body (413 beyond).
        body_timeout: Seconds a request body may take to arrive (408 beyond).
        header_timeout: Seconds a connection may take to send a request head, idle
            keep-alive included (closed beyond).
        max_connections: Connections at once (503 beyond).
        max_sessions: Sessions (A2A contexts, page tabs, ``X-Session-Id``) kept at once.
        idle_timeout: Seconds before an idle session is dropped.
        max_turns: Turns running at once.
        (The defaults of these four are :class:`ServeLimits`'.)
        a2a: Serve A2A (agent card and JSON-RPC endpoint).
        pool_size: Kernels started ahead of time for new sessions (a ``react`` agent with a
            ``toolkit.pyrepl`` gets a kernel per session).
    """

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    token_env: str = "SIMPLELLMFUNC_SERVE_TOKEN"
    token_file: str | None = None
    allowed_hosts: list[str] = []
    allowed_origins: list[str] = []
    max_body_bytes: Annotated[int, Field(ge=1024)] = 8 * 1024 * 1024
    body_timeout: Positive = 30.0
    header_timeout: Positive = 10.0
    max_connections: Annotated[int, Field(ge=1)] = 256
    max_sessions: Annotated[int, Field(ge=1)] = DEFAULT_LIMITS.max_sessions
    idle_timeout: Positive | None = DEFAULT_LIMITS.idle_timeout
    max_turns: Annotated[int, Field(ge=1)] = DEFAULT_LIMITS.max_turns
    a2a: bool = True
    pool_size: Annotated[int, Field(ge=0, le=32)] = DEFAULT_LIMITS.pool_size

    def limits(self) -> ServeLimits:
        """The section's limits (defaults: :class:`ServeLimits`')."""
        return ServeLimits(self.max_sessions, self.idle_timeout, self.max_turns, self.pool_size)


class AgentConfig(_Section):
    """One agent, as a config file describes it.

    Attributes:
        name: The agent's name (memory namespace, trace labels); default: the file's stem.
        description: What the agent does (for humans, and for agents calling it).
        kind: ``simple`` (one LLM call, no tools), ``react`` (the tool loop), ``chain``
            (``chain`` stages, each one LLM call fed the previous output), ``group`` (the
            ``agents`` in a group chat, see ``group``) or ``parallel`` (every one of the
            ``agents`` answers the same message at once, see ``parallel``).
        model: The model (see :class:`ModelConfig`).
        system: The system prompt.
        tool_protocol: ``native`` function calling, ``text`` (prompted actions, for models
            without tools), ``json`` (every step forced by a JSON schema: small local models on
            servers with schema-constrained decoding) or ``auto`` (native when the provider
            supports it).
        keyword_heuristic: With the text protocol, also read "use the X tool" prose as a call.
        toolkit: Tools.
        knowledge: A knowledge base searched with a ``retrieve`` tool.
        sandbox: The sandbox of the Python kernel and shell tools (``true``, ``false`` or a
            :class:`SandboxConfig`; absent: the kernel's default policy, shell tools none).
        skills: Skill folders (a list of folders, or a :class:`SkillsConfig`).
        memory: Agent memory.
        limits: Limits of a run.
        termination: Termination signals.
        history: The history window.
        trace: Trace options.
        checkpoints: Checkpoint options.
        chain: The stages of a ``chain`` agent.
        agents: The config files of a ``group`` or ``parallel`` agent's members (relative to
            this file).
        group: How the members of a ``group`` agent talk.
        parallel: How a ``parallel`` agent runs its members.
        handoffs: Config files of agents this one may hand the conversation to (they may hand
            it back, and on to their own ``handoffs``); the run reports which agent answered.
        serve: How ``simplellmfunc serve`` serves it (see :class:`ServeConfig`).
        durable: Durable runs and workers (``simplellmfunc worker``).
    """

    name: Name = "agent"
    description: str = ""
    kind: Literal["simple", "react", "chain", "group", "parallel"] = "react"
    model: ModelConfig
    system: str = ""
    tool_protocol: Literal["auto", "native", "text", "json"] = "auto"
    keyword_heuristic: bool = False
    toolkit: ToolkitConfig = ToolkitConfig()
    knowledge: KnowledgeConfig | None = None
    sandbox: SandboxConfig | None = None
    skills: list[Annotated[str, Field(min_length=1)]] | SkillsConfig = []
    memory: MemoryConfig = MemoryConfig()
    limits: LimitsConfig = LimitsConfig()
    termination: TerminationConfig = TerminationConfig()
    history: HistoryConfig = HistoryConfig()
    trace: TraceConfig = TraceConfig()
    checkpoints: CheckpointConfig = CheckpointConfig()
    chain: list[ChainStep] = []
    agents: list[str] = []
    group: GroupConfig = GroupConfig()
    parallel: ParallelConfig = ParallelConfig()
    handoffs: list[str] = []
    serve: ServeConfig = ServeConfig()
    durable: DurableSection | None = None

    def split_pyrepl(self) -> tuple[AgentConfig, dict[str, Any] | bool]:
        """This config without its shared kernel, and the ``PyRepl`` options of a kernel per
        session (``False`` when it has no ``toolkit.pyrepl``): what ``serve`` and ``web`` give
        a ``SessionStore``."""
        section = self.toolkit.pyrepl
        if section is None:
            return self, False
        toolkit = self.toolkit.model_copy(update={"pyrepl": None})
        options = {**section.repl_options(), "sandbox": self.kernel_sandbox()}
        return self.model_copy(update={"toolkit": toolkit}), options

    def kernel_sandbox(self) -> SandboxPolicy | bool:
        """The PyRepl kernel's ``sandbox=``: the default policy without a ``sandbox`` section,
        the section's policy, or ``False`` for ``sandbox: false``."""
        if self.sandbox is None:
            return True
        return self.sandbox.policy() or False

    @property
    def skills_section(self) -> SkillsConfig:
        """``skills`` as a :class:`SkillsConfig` (a plain list is its ``paths``)."""
        skills = self.skills
        return skills if isinstance(skills, SkillsConfig) else SkillsConfig(paths=skills)
