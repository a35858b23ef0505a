"""MCPToolset: the tools, resources and prompts of one MCP server, for ``toolkit=[...]``."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

import anyio
import httpx2
import mcp.types as types
from anyio.abc import TaskGroup
from mcp import Client
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from .._abort import AbortSignal
from ..exceptions import AbortedError, MCPError
from ..tools import Tool, ToolContext, ToolEventEmitter
from ._config import HttpSpec, ServerSpec, stdio_spec
from ._connection import Connection, ListKind, Options, describe, supervise, translate
from ._names import NameMap
from ._pages import all_pages
from ._results import MCPResult, prompt_messages, resource_result, tool_result
from ._tool import MCPTool

if TYPE_CHECKING:
    from ._group import MCPServerGroup

__all__ = ["MCPToolset"]

logger = logging.getLogger("simplellmfunc.mcp")

T = TypeVar("T")

_CLOSE_TIMEOUT = 8.0  # the stdio shutdown sequence needs up to ~6 s for a stubborn server
_CLIENT_INFO = types.Implementation(name="simplellmfunc", version="0.1.0")
_SDK_FAILURES = (SDKError, ValidationError, RuntimeError, httpx2.HTTPError, OSError)


class MCPToolset:
    """One MCP server as a tool provider: put it in ``toolkit=[...]`` next to ``@tool`` functions.

    Open it with ``async with toolset:`` (or ``await toolset.connect()`` and later
    ``await toolset.aclose()`` in the same task). One session is kept for the toolset's life and
    shared by every call; if the server crashes or drops the session, calls in flight fail with
    :class:`MCPError` and the next call reconnects (a stdio server is started again), up to
    ``max_reconnects`` attempts. A stdio server runs in its own process group, gets only an
    allowlisted environment plus ``env``, logs its stderr to ``simplellmfunc.mcp.stderr``, and
    is stopped with its whole group when the toolset closes.

    Args:
        spec: Where the server is (see :meth:`stdio`, :meth:`http`, :meth:`sse`).
        name: A label for errors and logs (default: the command or URL, without secrets).
        prefix: Put ``prefix_`` before every tool name the model sees.
        timeout: Per-call timeout in seconds (``None``: no limit besides the run's).
        connect_timeout: Seconds to start the server and finish the handshake.
        max_reconnects: Attempts to reopen a lost session before a call fails.
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
        resource_tools: bool = False,
        mode: str = "auto",
    ) -> None:
        self.spec = spec
        self.name = name or spec.label
        self.prefix = prefix
        self.timeout = timeout
        self.max_reconnects = max(1, max_reconnects)
        self.resource_tools = resource_tools
        self._options = Options(self.name, connect_timeout, mode, _CLIENT_INFO)
        self._group: TaskGroup | None = None
        self._owns_group = False
        self._conn: Connection | None = None
        self._open_lock = anyio.Lock()
        self._list_lock = anyio.Lock()
        self._tools: tuple[Tool, ...] | None = None
        self._stale: set[ListKind] = set()
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
        from ._group import MCPServerGroup

        return MCPServerGroup.from_config(source, prefix_names=prefix_names, **options)

    # --- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    @property
    def connected(self) -> bool:
        """Whether the toolset is open (its session may be reconnecting)."""
        return self._group is not None

    async def connect(self) -> None:
        """Start (or reach) the server and open the session; a no-op when already open.

        Raises:
            MCPError: The server could not be started or reached within ``connect_timeout``;
                nothing is left running.
        """
        if self._group is not None:
            return
        group = anyio.create_task_group()
        await group.__aenter__()
        self._owns_group = True
        try:
            await self._attach(group)
        except BaseException:
            self._group = None
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            raise

    async def aclose(self) -> None:
        """Close the session and stop a stdio server with its whole process group."""
        group = self._group
        if group is None:
            return
        await self._detach()
        if self._owns_group:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    async def _attach(self, group: TaskGroup) -> None:
        """Open the first session in ``group`` (owned by the caller for a server group)."""
        self._group = group
        await self._open(attempts=1)

    async def _detach(self) -> None:
        conn, self._conn, self._group = self._conn, None, None
        if conn is None:
            return
        conn.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
            await conn.ended.wait()

    async def _live(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.alive:
            return conn
        async with self._open_lock:
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            return await self._open(self.max_reconnects)

    async def _open(self, attempts: int) -> Connection:
        group = self._group
        if group is None:
            raise MCPError(
                f"MCP toolset {self.name} is not open: use 'async with toolset:' "
                "or 'await toolset.connect()' first"
            )
        failure: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                await anyio.sleep(min(0.25 * 2 ** (attempt - 1), 2.0))
            try:
                conn: Connection = await group.start(
                    supervise, self.spec, self._options, self._changed
                )
            except Exception as exc:  # boundary: why the server could not be reached
                failure = exc
                logger.warning("MCP server %s: cannot connect: %s", self.name, describe(exc))
                continue
            if self._conn is not None:
                self._stale.update(("tools", "prompts", "resources"))  # a new session
            self._conn = conn
            return conn
        reason = describe(failure) if failure is not None else "unknown"
        if isinstance(failure, TimeoutError):
            reason = f"no answer within {self._options.connect_timeout:g} s"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        raise MCPError(f"cannot connect to MCP server {self.name}{tries}: {reason}") from failure

    def _changed(self, kind: ListKind) -> None:
        self._stale.add(kind)

    # --- requests ----------------------------------------------------------------------------

    async def _request(
        self,
        what: str,
        send: Callable[[Client], Awaitable[T]],
        abort: AbortSignal | None = None,
    ) -> T:
        """Send one request on the live session, reconnecting first if it was lost.

        Raises:
            MCPError: Saying what failed, on which server, and why.
            AbortedError: When ``abort`` fires first; the server is told to cancel.
        """
        for attempt in range(2):
            conn = await self._live()
            try:
                return await _abortable(send(conn.client), abort)
            except _SDK_FAILURES as exc:
                failure = translate(exc, what, self.name)
                if failure.lost:
                    conn.close()
                if failure.unsent and attempt == 0:
                    continue
                raise failure.error from exc
        raise AssertionError("unreachable")

    async def _call_tool(
        self, tool: MCPTool, arguments: dict[str, Any], context: ToolContext | None
    ) -> MCPResult:
        emitter = context.event_emitter if context is not None else None
        abort = context.abort_signal if context is not None else None
        return await self.call_tool(
            tool.server_name, arguments, timeout=tool.timeout, emitter=emitter, abort_signal=abort
        )

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

        Progress notifications become ``mcp_progress`` events on ``emitter``.

        Raises:
            MCPError: When the call fails or times out (an ``isError`` result is returned).
            AbortedError: When ``abort_signal`` fires first.
        """
        server_name = self.names.server_name(name)
        progress = _progress_callback(emitter, self.name, server_name) if emitter else None
        result = await self._request(
            f"tool {server_name!r}",
            lambda client: client.call_tool(
                server_name, dict(arguments or {}), timeout, progress_callback=progress
            ),
            abort_signal,
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
        if tools is not None and "tools" not in self._stale:
            return tools
        return await self.refresh()

    async def refresh(self) -> tuple[Tool, ...]:
        """Fetch the tool list now (every page).

        Raises:
            MCPError: When the server cannot be reached or answers badly.
            ToolDefinitionError: When two tools map to the same model-facing name.
        """
        from ._extras import extra_tools

        async with self._list_lock:
            self._stale.discard("tools")
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

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version, once connected."""
        conn = self._conn
        return conn.client.server_info if conn is not None and conn.alive else None

    @property
    def instructions(self) -> str | None:
        """The server's instructions for using it, once connected."""
        conn = self._conn
        return conn.client.instructions if conn is not None and conn.alive else None

    def __repr__(self) -> str:
        state = "open" if self._group is not None else "closed"
        return f"<MCPToolset {self.name!r} {state}>"


async def _abortable(request: Awaitable[T], abort: AbortSignal | None) -> T:
    if abort is None:
        return await request
    with anyio.CancelScope() as scope:
        remove = abort.add_callback(lambda _reason: scope.cancel())
        try:
            return await request
        finally:
            remove()
    # Only reached when the abort cancelled the scope; the SDK told the server to cancel.
    raise AbortedError(abort.reason)


def _progress_callback(emitter: ToolEventEmitter, server: str, tool: str) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        data = {"server": server, "tool": tool, "progress": progress, "total": total}
        if message is not None:
            data["message"] = message
        await emitter.emit("mcp_progress", data)

    return on_progress
