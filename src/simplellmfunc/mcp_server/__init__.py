"""Our tools served over MCP: any toolkit with :func:`serve_mcp`, builtins from the command line.

``python -m simplellmfunc.mcp_server serve --pyrepl --files DIR [--http PORT]`` serves PyRepl
and / or FileToolset to any MCP client. This is the app layer: it imports the builtins. The MCP
client (:class:`~simplellmfunc.mcp.MCPToolset`) is a tool source and lives in
:mod:`simplellmfunc.mcp`, which never imports this package.
"""

from .._lazy import publish
from ._server import build_server, serve_mcp

__all__ = ["build_server", "serve_mcp"]

publish(__name__, __all__)
