"""MCP client: the tools, resources and prompts of any MCP server (:class:`MCPToolset`).

Serving our own tools over MCP is :mod:`simplellmfunc.mcp_server` (the app layer).
"""

from .._lazy import lazy_exports, publish
from ._client import MCPServerGroup, MCPToolset
from ._config import DEFAULT_ENV_ALLOWLIST, HttpSpec, StdioSpec, load_config
from ._helpers import mcp_tool, mcp_tools
from ._names import model_name
from ._results import MCPResult
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
    "mcp_tool",
    "mcp_tools",
    "model_name",
    "serve_mcp",
]

# Compatibility only: `build_server` and `serve_mcp` moved up to `simplellmfunc.mcp_server`
# (the app layer). They are forwarded upward by name, on first access, so that old imports keep
# working while this package never imports the server.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {"build_server": "simplellmfunc.mcp_server", "serve_mcp": "simplellmfunc.mcp_server"},
)

publish(__name__, __all__)
