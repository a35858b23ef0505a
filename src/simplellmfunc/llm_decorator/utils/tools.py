"""SimpleLLMFunc's ``llm_decorator.utils.tools`` module: ``process_tools``, a toolkit as the
model sees it, built the way the decorators build it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

from ...decorators import ToolkitItem, static_tools
from ...exceptions import ArgumentValueError
from ...tools import Tool

__all__ = ["process_tools"]


def process_tools(
    toolkit: Iterable[ToolkitItem] | None, func_name: str = "unknown_function"
) -> tuple[list[dict[str, Any]] | None, dict[str, Callable[..., Awaitable[Any]]]]:
    """The chat-completions ``tools`` entries of ``toolkit`` (``None`` when it is empty) and, by
    name, each tool's validating async call (``await runs[name](**arguments)``).

    Raises:
        ToolDefinitionError: For an item that is not a tool or a function, or duplicate names.
        ArgumentValueError: For a tool provider (its tools are listed at each call, so there is
            no list to give now).
    """
    tools, providers = static_tools(toolkit)
    if providers:
        raise ArgumentValueError(
            f"{func_name}: process_tools cannot list the tools of a tool provider "
            f"({providers[0]!r}); they are listed at each call"
        )
    if not tools:
        return None, {}
    return [item.spec().to_openai() for item in tools], {
        item.name: partial(Tool.__call__, item) for item in tools
    }
