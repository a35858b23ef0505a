"""serve_mcp: any toolkit (``@tool`` functions, builtins, providers) as an MCP server."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from .._abort import AbortSignal
from .._events import CustomEvent
from ..exceptions import ToolDefinitionError, UserError
from ..tools import (
    Tool,
    ToolContext,
    ToolEventEmitter,
    ToolProvider,
    render_error,
    render_result,
    render_result_async,
    tool,
)

if TYPE_CHECKING:
    from ..serving import EdgeGuard, EdgePolicy, Principals

__all__ = ["MCP_TOKEN_ENV", "build_server", "mcp_http_app", "serve_mcp"]

#: The environment variable the command line reads the token of an HTTP server from.
MCP_TOKEN_ENV = "SIMPLELLMFUNC_MCP_TOKEN"

# The logger users already configure for MCP, client and server alike.
logger = logging.getLogger("simplellmfunc.mcp")

_MAX_EVENT_TEXT = 2000


class _Toolkit:
    """The served tools: fixed ones, plus whatever providers list at each request."""

    def __init__(self, toolkit: Sequence[Any]) -> None:
        self.fixed: list[Tool] = []
        self.providers: list[ToolProvider] = []
        self._add(toolkit)
        self._cache: dict[str, Tool] | None = None if self.providers else _by_name(self.fixed)

    def _add(self, items: Sequence[Any]) -> None:
        for item in items:
            if isinstance(item, Tool):
                self.fixed.append(item)
            elif isinstance(item, ToolProvider):
                self.providers.append(item)
            elif isinstance(item, list | tuple):
                self._add(item)
            elif callable(item):
                self.fixed.append(tool(item))
            else:
                raise ToolDefinitionError(
                    f"cannot serve {item!r}: not a tool, provider or function"
                )

    async def tools(self) -> dict[str, Tool]:
        if self._cache is not None:
            return self._cache
        listed = list(self.fixed)
        for provider in self.providers:
            listed.extend(await provider.list_tools())
        return _by_name(listed)


def _by_name(tools: Sequence[Tool]) -> dict[str, Tool]:
    found: dict[str, Tool] = {}
    for item in tools:
        if item.name in found:
            raise ToolDefinitionError(f"two served tools are named {item.name!r}")
        found[item.name] = item
    return found


def build_server(
    toolkit: Sequence[Any], *, name: str = "simplellmfunc", instructions: str | None = None
) -> Server[Any]:
    """A low-level SDK ``Server`` whose tools are ``toolkit``'s.

    Each call gets a :class:`ToolContext`: custom events become progress notifications (when
    the client asked for progress) or log notifications, and a cancellation from the client
    cancels the tool and fires its abort signal. Failures become ``isError`` results: a tool
    that raised, and a result the tool reports as failed (:meth:`Tool.failed`: a code run that
    raised). ``serverInfo.version`` is the package's version.

    Raises:
        ToolDefinitionError: For an item that is no tool, provider or function.
    """
    served = _Toolkit(toolkit)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        tools = await served.tools()
        return types.ListToolsResult(tools=[_describe(t) for t in tools.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        found = (await served.tools()).get(params.name)
        if found is None:
            return _error(f"Error: there is no tool named {params.name!r}")
        return await _run(found, params.arguments or {}, ctx)

    return Server(
        name,
        version=__version__,
        instructions=instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def _describe(item: Tool) -> types.Tool:
    return types.Tool(name=item.name, description=item.description, input_schema=item.parameters)


async def _run(
    item: Tool, arguments: dict[str, Any], ctx: ServerRequestContext[Any]
) -> types.CallToolResult:
    call_id = str(ctx.request_id)
    abort = AbortSignal()
    emitter = ToolEventEmitter(tool_name=item.name, tool_call_id=call_id, sink=_notifier(ctx))
    try:
        raw = await item.invoke(arguments, ToolContext(call_id, item.name, emitter, abort))
        value = item.render(raw)
        if isinstance(value, str):
            rendered = render_result(value, budget_tokens=0)
        else:  # may read image files
            rendered = await render_result_async(value, budget_tokens=0, tool_name=item.name)
    except anyio.get_cancelled_exc_class():
        abort.abort("cancelled by the MCP client")
        raise
    except Exception as exc:  # boundary: a tool failure becomes a result the client sees
        logger.info("served tool %s failed: %s", item.name, type(exc).__name__)
        return _error(render_error(exc))
    content: list[types.ContentBlock] = [types.TextContent(text=rendered.text)]
    for image in rendered.images:
        content.append(_image_block(image.url))
    return types.CallToolResult(content=content, is_error=item.failed(raw))


def _image_block(url: str) -> types.ContentBlock:
    if url.startswith("data:") and ";base64," in url:
        header, data = url.split(",", 1)
        return types.ImageContent(data=data, mime_type=header[5:].split(";", 1)[0])
    return types.TextContent(text=f"[image] {url}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _notifier(ctx: ServerRequestContext[Any]) -> Callable[[CustomEvent], Any]:
    """Send a tool's custom events to the client: progress if it asked, else log messages."""
    wants_progress = progress_token_from_params(ctx.params) is not None
    may_log = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS  # 2026 logging is opt-in
    count = 0

    async def sink(event: CustomEvent) -> None:
        nonlocal count
        count += 1
        text = _event_text(event)
        if wants_progress:
            await ctx.session.report_progress(count, None, text)
        elif may_log:
            params = types.LoggingMessageNotificationParams(
                level="info",
                logger=event.event_name,
                data={"event": event.event_name, "data": text},
            )
            notification = types.LoggingMessageNotification(params=params)
            await ctx.session.send_notification(notification, related_request_id=ctx.request_id)

    return sink


def _event_text(event: CustomEvent) -> str:
    data = event.data
    if isinstance(data, str):
        text = data
    else:
        try:
            text = json.dumps(data, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(data)
    return f"{event.event_name}: {text}"[:_MAX_EVENT_TEXT]


def http_edge(
    host: str,
    principals: Principals | None,
    allowed_hosts: Sequence[str] = (),
    policy: EdgePolicy | None = None,
) -> EdgePolicy:
    """The checks of an HTTP server bound to ``host`` (see :func:`mcp_http_app`).

    Raises:
        UserError: Off loopback without a token, or on every interface without
            ``allowed_hosts``.
    """
    from ..serving import EdgePolicy, allowed_hosts_for, is_loopback

    if not is_loopback(host) and (principals is None or not principals.required):
        raise UserError(
            f"serving tools over MCP on {host!r} (off loopback) needs a token: set "
            f"{MCP_TOKEN_ENV} or give --token-file FILE"
        )
    hosts = allowed_hosts_for(host, allowed_hosts)
    return dataclasses.replace(policy or EdgePolicy(), allowed_hosts=hosts)


def mcp_http_app(
    toolkit: Sequence[Any],
    *,
    name: str = "simplellmfunc",
    host: str = "127.0.0.1",
    path: str = "/mcp",
    instructions: str | None = None,
    principals: Principals | None = None,
    allowed_hosts: Sequence[str] = (),
    policy: EdgePolicy | None = None,
) -> EdgeGuard:
    """``toolkit`` over MCP's streamable HTTP, as an ASGI app for a server bound to ``host``,
    behind the same :class:`~simplellmfunc.serving.EdgeGuard` as every other door: the
    ``Host`` header must name the server (the loopback names on loopback, ``allowed_hosts``
    otherwise: no DNS rebinding), cross-origin and non-JSON requests are refused (no web page
    can call a tool), bodies are bounded, and off loopback every request needs a token.

    Args:
        principals: The tokens accepted (:meth:`Principals.resolve`); ``None``: none needed,
            which is allowed on loopback only.
        allowed_hosts: The names clients reach the server by, when it is not on loopback.
        policy: The limits (default: :class:`EdgePolicy`'s, with the hosts above).

    Raises:
        UserError: Off loopback without a token, or on every interface without
            ``allowed_hosts``.
    """
    from ..serving import EdgeGuard, Principals

    edge = http_edge(host, principals, allowed_hosts, policy)
    server = build_server(toolkit, name=name, instructions=instructions)
    # The SDK's own Host / Origin check stays on where it turns itself on (loopback).
    app = server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        max_request_body_size=edge.max_body_bytes,
    )
    return EdgeGuard(app, policy=edge, principals=principals or Principals.open())


async def serve_mcp(
    toolkit: Sequence[Any],
    *,
    name: str = "simplellmfunc",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    instructions: str | None = None,
    principals: Principals | None = None,
    allowed_hosts: Sequence[str] = (),
    policy: EdgePolicy | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Serve ``toolkit`` over MCP until cancelled (stdio) or stopped (HTTP: SIGINT / SIGTERM).

    Over stdio nothing else may write to stdout. Over HTTP the server listens on loopback
    unless ``host`` says otherwise, behind the checks of :func:`mcp_http_app` (``principals``,
    ``allowed_hosts`` and ``policy`` are its), with the header and idle timeouts and the
    connection cap of every other server of this package; ``announce`` gets the base URL.

    Raises:
        ToolDefinitionError: For an item that is no tool, provider or function.
        UserError: Over HTTP off loopback without a token (see :func:`mcp_http_app`).
    """
    if transport == "stdio":
        server = build_server(toolkit, name=name, instructions=instructions)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    from ..serving import serve_app

    app = mcp_http_app(
        toolkit,
        name=name,
        host=host,
        path=path,
        instructions=instructions,
        principals=principals,
        allowed_hosts=allowed_hosts,
        policy=policy,
    )
    await serve_app(lambda _url: app, host, port, announce=announce, policy=app.policy)
