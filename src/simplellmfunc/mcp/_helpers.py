"""``mcp_tools`` / ``mcp_tool``: the seed's convenience functions (seed 001 §19.4).

The seed's ``mcp_tools(url)`` returns a list of tools at once. A tool of an MCP server is only
callable while a session with the server is open, so here both helpers are async context
managers: the session opens on entry and closes on exit, and the tools are usable in between::

    async with mcp_tools("http://localhost:3000/mcp") as tools:
        agent = llm_chat(llm, toolkit=tools)(...)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..exceptions import MCPError
from ..tools import Tool
from ._client import MCPToolset

__all__ = ["mcp_tool", "mcp_tools"]


def _toolset(url: str, options: dict[str, Any]) -> MCPToolset:
    return MCPToolset.http(url, **options)


@asynccontextmanager
async def mcp_tools(url: str, **options: object) -> AsyncIterator[list[Tool]]:
    """Every tool of the streamable-HTTP MCP server at ``url``, while the session is open.

    Args:
        url: The server's MCP endpoint.
        **options: See :class:`MCPToolset` (``headers``, ``timeout``, ``call_retries`` ...).

    Raises:
        MCPError: When the server cannot be reached or lists its tools badly.
    """
    async with _toolset(url, options) as toolset:
        yield list(await toolset.list_tools())


@asynccontextmanager
async def mcp_tool(url: str, name: str, **options: object) -> AsyncIterator[Tool]:
    """The tool called ``name`` (its name on the server, or the name the model sees) of the
    MCP server at ``url``, while the session is open.

    Raises:
        MCPError: When the server cannot be reached or has no such tool (the message lists
            the tools it has).
    """
    async with mcp_tools(url, **options) as tools:
        for tool in tools:
            if name in (tool.name, getattr(tool, "server_name", None)):
                yield tool
                return
        names = ", ".join(sorted(t.name for t in tools)) or "none"
        raise MCPError(f"the MCP server at {url} has no tool {name!r} (tools: {names})")
