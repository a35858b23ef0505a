"""Tools: ``@tool``, ``Tool``, schemas from signatures, and the event emitter."""

from .._lazy import publish
from ._decorator import tool
from ._docstring import ParsedDocstring, parse_docstring
from ._emitter import ToolEventEmitter
from ._render import (
    RenderedResult,
    render_error,
    render_result,
    render_result_async,
    render_unknown_tool,
)
from ._sandboxed import SandboxedTool, sandboxed
from ._schema import ArgumentsError
from ._task import TaskTool
from ._tool import (
    ApprovalFlag,
    FunctionTool,
    Tool,
    ToolContext,
    ToolProvider,
    check_approval_flag,
    check_tool_name,
)

__all__ = [
    "ApprovalFlag",
    "ArgumentsError",
    "FunctionTool",
    "ParsedDocstring",
    "RenderedResult",
    "SandboxedTool",
    "TaskTool",
    "Tool",
    "ToolContext",
    "ToolEventEmitter",
    "ToolProvider",
    "check_approval_flag",
    "check_tool_name",
    "parse_docstring",
    "render_error",
    "render_result",
    "render_result_async",
    "render_unknown_tool",
    "sandboxed",
    "tool",
]

publish(__name__, __all__)
