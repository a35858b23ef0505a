"""MCP: tools from any MCP server (:class:`MCPToolset`), and our tools served over MCP."""

from ._client import MCPToolset
from ._config import DEFAULT_ENV_ALLOWLIST, HttpSpec, StdioSpec, load_config
from ._group import MCPServerGroup
from ._names import model_name
from ._results import MCPResult
from ._server import build_server, serve_mcp
from ._tool import MCPTool

__all__ = [
    "DEFAULT_ENV_ALLOWLIST",
    "HttpSpec",
    "MCPResult",
    "MCPServerGroup",
    "MCPTool",
    "MCPToolset",
    "StdioSpec",
    "build_server",
    "load_config",
    "model_name",
    "serve_mcp",
]
