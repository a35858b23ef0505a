"""MCPToolset: the tools, resources and prompts of one MCP server, for ``toolkit=[...]``.

Also :class:`MCPServerGroup`, the toolsets of a configuration file: each class builds the other
(``MCPToolset.from_config``, ``MCPServerGroup.from_config``), so both live here, over the
group mechanism in ``_group``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Self

import anyio
import httpx2
import mcp.types as types
from mcp.shared.dispatcher import ProgressFnT

from .._abort import AbortSignal
from ..exceptions import UserError
from ..tools import Tool, ToolContext, ToolEventEmitter
from ._config import HttpSpec, ServerSpec, load_config, stdio_spec
from ._extras import extra_tools
from ._group import LinkGroup
from ._link import ServerLink
from ._names import NameMap
from ._pages import all_pages
from ._results import MCPResult, prompt_messages, resource_result, tool_result
from ._tool import MCPTool

__all__ = ["MCPServerGroup", "MCPToolset"]


class MCPToolset(ServerLink):
    """One MCP server as a tool provider: put it in ``toolkit=[...]`` next to ``@tool`` functions.

    Open it with ``async with toolset:`` (or ``await toolset.connect()`` and later
    ``await toolset.aclose()`` in the same task). One session is kept for the toolset's life and
    shared by every call; if the server crashes or drops the session, calls in flight fail with
    :class:`MCPError` and the next call reconnects (a stdio server is started again), up to
    ``max_reconnects`` attempts. A stdio server runs in its own process group, gets only an
    allowlisted environment plus ``env``, logs its stderr to ``simplellmfunc.mcp.stderr``, and
    is stopped with its whole group when the toolset closes. A server that ends before its
    session is up fails the connect with an :class:`MCPError` that carries its ``exit_code`` and
    ``stderr_tail`` (the last 20 lines, at most 4 KB, with the values given in ``env`` redacted).

    Args:
        spec: Where the server is (see :meth:`stdio`, :meth:`http`, :meth:`sse`).
        name: A label for errors and logs (default: the command or URL, without secrets).
        prefix: Put ``prefix_`` before every tool name the model sees.
        timeout: Per-call timeout in seconds (``None``: no limit besides the run's).
        connect_timeout: Seconds to start the server and finish the handshake.
        max_reconnects: Attempts to reopen a lost session before a call fails.
        call_retries: Times a tool call that failed on a disconnect or a timeout is sent again
            (after 0.5, 1, 2 ... s). Off by default: the server may have acted on the first
            one, so turn it on for tools that are safe to repeat. A call the server certainly
            never saw is always sent once more.
        resource_tools: Also offer ``read_resource`` and ``get_prompt`` as tools.
        mode: ``"auto"`` (newest protocol the server speaks) or ``"legacy"`` (initialize
            handshake only).
    """

    def __init__(
        self,
        spec: ServerSpec,
        *,
        name: str | None = None,
        prefix: str | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        max_reconnects: int = 3,
        call_retries: int = 0,
        resource_tools: bool = False,
        mode: str = "auto",
    ) -> None:
        super().__init__(
            spec,
            name=name,
            connect_timeout=connect_timeout,
            max_reconnects=max_reconnects,
            mode=mode,
        )
        if call_retries < 0:
            raise UserError(f"call_retries must be 0 or more, got {call_retries}")
        self.prefix = prefix
        self.timeout = timeout
        self.call_retries = call_retries
        self.resource_tools = resource_tools
        self._list_lock = anyio.Lock()
        self._tools: tuple[Tool, ...] | None = None
        self.names = NameMap({})

    # --- constructors ------------------------------------------------------------------------

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        *,
        inherit_env: Sequence[str] = (),
        **options: Any,
    ) -> Self:
        """A server started as ``command args...`` and spoken to over stdin / stdout.

        Args:
            command: The executable.
            args: Its arguments.
            env: Extra environment variables for the server (on top of a small allowlist such
                as ``PATH`` and ``HOME``; host secrets are not inherited).
            cwd: Working directory.
            inherit_env: Names of further host variables to pass through.
            **options: See :class:`MCPToolset`.
        """
        return cls(stdio_spec(command, args, env, cwd, inherit_env), **options)

    @classmethod
    def http(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        **options: Any,
    ) -> Self:
        """A server reached over streamable HTTP (``auth`` is an ``httpx2.Auth``, as the SDK's)."""
        return cls(HttpSpec(url, dict(headers or {}), auth), **options)

    @classmethod
    def sse(
        cls,
        url: str,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        **options: Any,
    ) -> Self:
        """A server reached over the legacy HTTP+SSE transport."""
        return cls(HttpSpec(url, dict(headers or {}), auth, "sse"), **options)

    @classmethod
    def from_config(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any],
        *,
        prefix_names: bool = True,
        **options: Any,
    ) -> MCPServerGroup:
        """Every server of a ``{"mcpServers": {...}}`` file (or mapping) as one tool provider.

        With ``prefix_names`` each tool name starts with its server's name.

        Raises:
            ConfigError: For an unreadable or invalid configuration.
        """
        return MCPServerGroup.from_config(source, prefix_names=prefix_names, **options)

    # --- lifecycle ---------------------------------------------------------------------------

    async def _call_tool(
        self,
        server_name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        context: ToolContext | None,
    ) -> MCPResult:
        """An :class:`MCPTool`'s call (see :class:`~._tool.ToolCaller`).

        ``server_name`` is not looked up among the model-facing names: with a prefix, one
        tool's server name can be another tool's model-facing name.
        """
        emitter = context.event_emitter if context is not None else None
        abort = context.abort_signal if context is not None else None
        return await self._call(server_name, arguments, timeout, emitter, abort)

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        emitter: ToolEventEmitter | None = None,
        abort_signal: AbortSignal | None = None,
    ) -> MCPResult:
        """Call tool ``name`` (its server name, or the model-facing one) without validation.

        A model-facing name wins over a server name that reads the same. Progress
        notifications become ``mcp_progress`` events on ``emitter``.

        Raises:
            MCPError: When the call fails or times out (an ``isError`` result is returned).
            AbortedError: When ``abort_signal`` fires first.
        """
        server_name = self.names.server_name(name)
        return await self._call(server_name, dict(arguments or {}), timeout, emitter, abort_signal)

    async def _call(
        self,
        server_name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        emitter: ToolEventEmitter | None,
        abort_signal: AbortSignal | None,
    ) -> MCPResult:
        progress = _progress_callback(emitter, self.name, server_name) if emitter else None
        result = await self._request(
            f"tool {server_name!r}",
            lambda client: client.call_tool(
                server_name, arguments, timeout, progress_callback=progress
            ),
            abort_signal,
            retries=self.call_retries,
        )
        return tool_result(result)

    # --- discovery ---------------------------------------------------------------------------

    async def list_tools(self) -> tuple[Tool, ...]:
        """The server's tools (fetched again after the server reported a change).

        Raises:
            MCPError: When the server cannot be reached or answers badly.
            ToolDefinitionError: When two tools map to the same model-facing name.
        """
        tools = self._tools
        # The resource tools list the server's resources and prompts in their descriptions.
        watched = {"tools", "resources", "prompts"} if self.resource_tools else {"tools"}
        if tools is not None and not watched & self._stale:
            return tools
        return await self.refresh()

    async def refresh(self) -> tuple[Tool, ...]:
        """Fetch the tool list now (every page).

        Raises:
            MCPError: When the server cannot be reached or answers badly.
            ToolDefinitionError: When two tools map to the same model-facing name.
        """
        async with self._list_lock:
            self._stale.difference_update(("tools", "resources", "prompts"))
            specs = await all_pages(
                lambda cursor: self._request(
                    "tools/list", lambda client: client.list_tools(cursor=cursor)
                ),
                lambda page: page.tools,
                self.name,
            )
            extras = await extra_tools(self) if self.resource_tools else []
            names = NameMap.build(
                [s.name for s in specs] + [e.name for e in extras], self.prefix, self.name
            )
            mapped = names.model_names()
            tools: list[Tool] = [MCPTool(self, s, mapped[s.name], self.timeout) for s in specs]
            tools.extend(e.build(mapped[e.name]) for e in extras)
            self.names, self._tools = names, tuple(tools)
            return self._tools

    async def list_resources(self) -> list[types.Resource]:
        """Every resource the server lists.

        Raises:
            MCPError: When the server cannot be reached or answers badly.
        """
        return await all_pages(
            lambda cursor: self._request(
                "resources/list", lambda client: client.list_resources(cursor=cursor)
            ),
            lambda page: page.resources,
            self.name,
        )

    async def read_resource(self, uri: str) -> MCPResult:
        """Read the resource at ``uri``: text parts, and images for image resources.

        Raises:
            MCPError: When the server cannot be reached or reports an error.
        """
        result = await self._request(f"resource {uri!r}", lambda client: client.read_resource(uri))
        return resource_result(result)

    async def list_prompts(self) -> list[types.Prompt]:
        """Every prompt the server lists.

        Raises:
            MCPError: When the server cannot be reached or answers badly.
        """
        return await all_pages(
            lambda cursor: self._request(
                "prompts/list", lambda client: client.list_prompts(cursor=cursor)
            ),
            lambda page: page.prompts,
            self.name,
        )

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]:
        """Render prompt ``name`` into chat messages (``{"role", "content"}`` dicts).

        Raises:
            MCPError: When the server cannot be reached or reports an error.
        """
        result = await self._request(
            f"prompt {name!r}",
            lambda client: client.get_prompt(name, dict(arguments) if arguments else None),
        )
        return prompt_messages(result)

    def __repr__(self) -> str:
        state = "open" if self._group is not None else "closed"
        return f"<MCPToolset {self.name!r} {state}>"


class MCPServerGroup(LinkGroup[MCPToolset]):
    """Several :class:`MCPToolset` s that open, list and close together.

    ``async with`` starts every server concurrently; if one fails, the others are stopped and
    the error names it. Tool names must be unique across the servers (the default server-name
    prefixes see to that). ``group["name"]`` is one server's toolset, for its resources and
    prompts.
    """

    @classmethod
    def from_config(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any],
        *,
        prefix_names: bool = True,
        **options: Any,
    ) -> Self:
        """Build the group from ``{"mcpServers": {...}}`` (see :func:`load_config`).

        Raises:
            ConfigError: For an unreadable or invalid configuration.
        """
        specs = load_config(source)
        return cls(
            {
                name: MCPToolset(spec, name=name, prefix=name if prefix_names else None, **options)
                for name, spec in specs.items()
            }
        )


def _progress_callback(emitter: ToolEventEmitter, server: str, tool: str) -> ProgressFnT:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        data = {"server": server, "tool": tool, "progress": progress, "total": total}
        if message is not None:
            data["message"] = message
        await emitter.emit("mcp_progress", data)

    return on_progress
