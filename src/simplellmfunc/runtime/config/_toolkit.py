"""The config's ``toolkit`` and ``sandbox`` sections: the agent's tools (a Python kernel,
workspace files, MCP servers, shell commands, agents and A2A agents as tools) and the sandbox
its kernel and shell tools run in."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from ...sandbox import SandboxPolicy
from ._sections import SECTION, Count, Positive, ToolName

__all__ = [
    "A2AToolConfig",
    "AgentToolConfig",
    "FilesConfig",
    "PyReplConfig",
    "SandboxConfig",
    "ShellToolConfig",
    "ToolkitConfig",
]


class _Section(BaseModel):
    model_config = SECTION


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


_POLICY = SandboxPolicy()


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
