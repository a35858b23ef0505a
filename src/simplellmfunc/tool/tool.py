"""SimpleLLMFunc's ``SimpleLLMFunc.tool.tool`` module: the same names as
:mod:`simplellmfunc.tool` (``Tool``, ``tool``, ``TOO_LONG_TO_FILE_MAX_TOKENS``)."""

from __future__ import annotations

from . import TOO_LONG_TO_FILE_MAX_TOKENS, Tool, tool

__all__ = ["TOO_LONG_TO_FILE_MAX_TOKENS", "Tool", "tool"]
