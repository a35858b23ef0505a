"""``python -m simplellmfunc.mcp serve ...``: the same as ``python -m simplellmfunc.mcp_server``.

Compatibility only: the server command moved up to :mod:`simplellmfunc.mcp_server` (the app
layer). This module forwards upward by name, at run time, so the client package never imports
the server.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``simplellmfunc.mcp_server``'s command line; returns the exit status."""
    server_cli = importlib.import_module("simplellmfunc.mcp_server.__main__")
    status: int = server_cli.main(argv)
    return status


if __name__ == "__main__":
    sys.exit(main())
