"""SimpleLLMFunc's ``base.tool_call.extraction`` module: parsing tool calls out of OpenAI SDK
response objects inside its ReAct loop. Here each provider turns its wire format into
:class:`~simplellmfunc.types.ToolCall` values itself, so these names have no counterpart."""

from __future__ import annotations

from ..._compat import compat_getattr

__all__: list[str] = []

_INSTEAD = (
    "providers parse tool calls from their own stream; read ToolCall values from the run's "
    "events (simplellmfunc.events) or from the assistant message in the history"
)

__getattr__ = compat_getattr(
    __name__,
    None,
    dict.fromkeys(
        (
            "accumulate_tool_calls_from_chunks",
            "extract_reasoning_details",
            "extract_reasoning_details_from_stream",
            "extract_tool_calls",
            "extract_tool_calls_from_stream_response",
            "parse_tool_call_arguments",
            "repair_tool_call_arguments",
        ),
        _INSTEAD,
    ),
)
