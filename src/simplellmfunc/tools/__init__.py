"""Tools: ``@tool``, ``Tool``, schemas from signatures, and the event emitter."""

from ._emitter import ToolEventEmitter
from ._schema import ArgumentsError
from ._tool import FunctionTool, Tool, ToolContext, ToolProvider, check_tool_name, tool

__all__ = [
    "ArgumentsError",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolEventEmitter",
    "ToolProvider",
    "check_tool_name",
    "tool",
]
