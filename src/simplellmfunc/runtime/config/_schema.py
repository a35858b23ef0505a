"""The agent config: what a YAML / TOML / JSON agent file may say, validated by pydantic.

A minimal file::

    model: deepseek:deepseek-chat
    system: You are a helpful assistant.

Every section, with its defaults, is a pydantic model; the shipped ``examples/agents/*.yml``
show them in use. Shorthands are accepted and normalised before validation (see
:func:`~._shapes.normalize`): ``model: "provider:model"``, ``pyrepl: true``,
``files: ./workspace``, chain steps as plain strings. Reading the files, the precedence of
command line > environment > file > defaults and the error messages with lines live in
:mod:`._file` and :mod:`._precedence`.

Here: the whole agent (:class:`AgentConfig`), its model and how several agents work together
or are served; the tool sections live in :mod:`._toolkit`, the knowledge, skills and memory
sections in :mod:`._knowledge`, the run policies in :mod:`._policies`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from ...sandbox import SandboxPolicy
from ._knowledge import KnowledgeConfig, MemoryConfig, SkillsConfig
from ._limits import DEFAULT_LIMITS, ServeLimits
from ._policies import (
    CheckpointConfig,
    DurableSection,
    HistoryConfig,
    LimitsConfig,
    TerminationConfig,
    TraceConfig,
)
from ._sections import SECTION, Name, Positive
from ._toolkit import SandboxConfig, ToolkitConfig

__all__ = [
    "AgentConfig",
    "ChainStep",
    "GroupConfig",
    "ModelConfig",
    "ParallelConfig",
    "ServeConfig",
]


class _Section(BaseModel):
    model_config = SECTION


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
        max_sessions_per_principal: Sessions one principal may have open (none: no cap).
        max_turns_per_principal: Turns one principal may run at once (none: no cap).
        (The defaults of these six are :class:`ServeLimits`'.)
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
    max_sessions_per_principal: Annotated[int, Field(ge=1)] | None = (
        DEFAULT_LIMITS.max_sessions_per_principal
    )
    max_turns_per_principal: Annotated[int, Field(ge=1)] | None = (
        DEFAULT_LIMITS.max_turns_per_principal
    )
    a2a: bool = True
    pool_size: Annotated[int, Field(ge=0, le=32)] = DEFAULT_LIMITS.pool_size

    def limits(self) -> ServeLimits:
        """The section's limits (defaults: :class:`ServeLimits`')."""
        return ServeLimits(
            self.max_sessions,
            self.idle_timeout,
            self.max_turns,
            self.pool_size,
            self.max_sessions_per_principal,
            self.max_turns_per_principal,
        )


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
