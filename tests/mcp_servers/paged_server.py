"""A low-level MCP server that pages its tool list and uses names providers reject.

    python tests/mcp_servers/paged_server.py [--page-size N] [--collide] [--also NAME ...]

Every tool answers ``called <its server name> with <arguments as JSON>``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import mcp.types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server

PLAIN = [f"tool_{i:02d}" for i in range(25)]
ODD = ["dotted.name", "with space", "ünïcode", "x" * 70 + "_a", "x" * 70 + "_b"]
COLLIDING = ["a.b", "a_b"]

_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "properties": {"value": {"type": "integer", "minimum": 0}},
    "required": ["value"],
}


def build(page_size: int, collide: bool, also: list[str]) -> Server[Any]:
    names = PLAIN + ODD + (COLLIDING if collide else []) + also

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = names[start : start + page_size]
        end = start + len(page)
        tools = [types.Tool(name=n, description=f"Tool {n}.", input_schema=_SCHEMA) for n in page]
        cursor = str(end) if end < len(names) else None
        return types.ListToolsResult(tools=tools, next_cursor=cursor)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        text = f"called {params.name} with {json.dumps(params.arguments, sort_keys=True)}"
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(page_size: int, collide: bool, also: list[str]) -> None:
    server = build(page_size, collide, also)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-size", type=int, default=10)
    parser.add_argument("--collide", action="store_true")
    parser.add_argument("--also", action="append", default=[], help="one more tool name")
    args = parser.parse_args()
    anyio.run(main, args.page_size, args.collide, args.also)
