"""A stdio MCP server whose module fails to import (a missing dependency)."""

from __future__ import annotations

import simplellmfunc_no_such_dependency  # noqa: F401  # the failure under test

if __name__ == "__main__":
    raise SystemExit("unreachable")
