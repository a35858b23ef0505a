"""SimpleLLMFunc's ``type.tool_call`` module: tool calls and tool definitions.

A tool call is :class:`simplellmfunc.types.ToolCall`, with the OpenAI attribute shape
(``call.id``, ``call.type``, ``call.function.name``, ``call.function.arguments``); tool
definitions are the OpenAI ``tools`` entries as typed dicts.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, TypedDict

from .._messages import ToolCall, ToolCallFunction

__all__ = [
    "AccumulatedToolCall",
    "ToolCall",
    "ToolCallArguments",
    "ToolCallFunction",
    "ToolCallFunctionInfo",
    "ToolDefinition",
    "ToolDefinitionList",
    "ToolFunctionDefinition",
    "dict_to_tool_call",
    "tool_call_to_dict",
]

#: A tool call's arguments, parsed from JSON.
ToolCallArguments: TypeAlias = dict[str, Any]


class ToolFunctionDefinition(TypedDict):
    """The ``function`` of an OpenAI tool definition."""

    name: str
    description: str
    parameters: dict[str, Any]


class ToolDefinition(TypedDict):
    """An OpenAI tool definition (``{"type": "function", "function": ...}``)."""

    type: Literal["function"]
    function: ToolFunctionDefinition


ToolDefinitionList: TypeAlias = list[ToolDefinition] | None


class ToolCallFunctionInfo(TypedDict):
    """A tool call's function while its stream deltas are being put together."""

    name: str | None
    arguments: str


class AccumulatedToolCall(TypedDict):
    """A tool call while its stream deltas are being put together."""

    id: str | None
    type: str | None
    function: ToolCallFunctionInfo


def dict_to_tool_call(data: dict[str, Any]) -> ToolCall:
    """The :class:`ToolCall` of an OpenAI ``tool_calls`` entry.

    Raises:
        KeyError: If ``id``, ``function.name`` or ``function.arguments`` is missing.
    """
    function = data["function"]
    return ToolCall(data["id"], function["name"], function["arguments"])


def tool_call_to_dict(tool_call: Any) -> dict[str, Any]:
    """The OpenAI ``tool_calls`` entry of a tool call (ours, or any object of that shape, such
    as the OpenAI SDK's)."""
    return {
        "id": tool_call.id,
        "type": tool_call.type,
        "function": {
            "name": tool_call.function.name,
            "arguments": tool_call.function.arguments,
        },
    }
