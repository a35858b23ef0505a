"""SimpleLLMFunc's ``llm_decorator.utils.tools`` module: ``process_tools``, a toolkit as the
model sees it, built the way the decorators build it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from ...decorators._common import ToolkitItem, static_tools
from ...exceptions import ArgumentValueError

__all__ = ["process_tools"]


def process_tools(
    toolkit: Iterable[ToolkitItem] | None, func_name: str = "unknown_function"
) -> tuple[list[dict[str, Any]] | None, dict[str, Callable[..., Awaitable[Any]]]]:
    """The chat-completions ``tools`` entries of ``toolkit`` (``None`` when it is empty) and each
    tool's ``run`` by name.

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
    return [item.spec().to_openai() for item in tools], {item.name: item.run for item in tools}
