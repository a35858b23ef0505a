"""Our tools served over MCP: any toolkit with :func:`serve_mcp`, builtins from the command line.

``python -m simplellmfunc.mcp_server serve --pyrepl --files DIR [--http PORT]`` serves PyRepl
and / or FileToolset to any MCP client. Over HTTP (:func:`mcp_http_app`) the server answers only
to its own host names, refuses browsers' cross-site requests and non-JSON bodies, and off
loopback needs a token (``SIMPLELLMFUNC_MCP_TOKEN`` or ``--token-file``).

This is the app layer: it imports the builtins. The MCP client
(:class:`~simplellmfunc.mcp.MCPToolset`) is a tool source and lives in :mod:`simplellmfunc.mcp`,
which never imports this package.
"""

from .._lazy import publish
from ._server import MCP_TOKEN_ENV, build_server, mcp_http_app, serve_mcp

__all__ = ["MCP_TOKEN_ENV", "build_server", "mcp_http_app", "serve_mcp"]

publish(__name__, __all__)
