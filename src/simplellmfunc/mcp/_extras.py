"""Optional tools that let the model read a server's resources and prompts."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import mcp.types as types

from ..exceptions import MCPError
from ..tools import FunctionTool, Tool
from ._results import MCPResult

__all__ = ["Extra", "ResourceSource", "extra_tools"]

_LISTED = 20


class ResourceSource(Protocol):
    """What the extra tools need of a toolset: its label, timeout, resources and prompts.

    ``MCPToolset`` is the one implementation; the protocol keeps this module below it.
    """

    @property
    def name(self) -> str: ...

    @property
    def timeout(self) -> float | None: ...

    async def list_resources(self) -> list[types.Resource]: ...

    async def list_prompts(self) -> list[types.Prompt]: ...

    async def read_resource(self, uri: str) -> MCPResult: ...

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class Extra:
    """A tool to add under a model-facing name chosen with the server's own tools."""

    name: str
    build: Callable[[str], Tool]


async def extra_tools(toolset: ResourceSource) -> list[Extra]:
    """``read_resource`` and ``get_prompt`` tools, listing what the server offers."""
    resources = await _try(toolset.list_resources)
    prompts = await _try(toolset.list_prompts)

    async def read_resource(uri: str) -> Any:
        """Read a resource of the MCP server.

        Args:
            uri: The resource URI.
        """
        return (await toolset.read_resource(uri)).for_model()

    async def get_prompt(name: str, arguments: dict[str, str] | None = None) -> str:
        """Get a prompt template of the MCP server, filled in.

        Args:
            name: The prompt name.
            arguments: The prompt's arguments.
        """
        messages = await toolset.get_prompt(name, arguments)
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)

    resource_lines = [
        f"- {r.uri} ({r.name}): {r.description or ''}".rstrip(": ") for r in resources
    ]
    prompt_lines = [
        f"- {p.name}({', '.join(a.name for a in p.arguments or [])}): {p.description or ''}"
        for p in prompts
    ]
    return [
        Extra(
            "read_resource",
            _builder(read_resource, "Read a resource of MCP server", toolset, resource_lines),
        ),
        Extra(
            "get_prompt", _builder(get_prompt, "Get a prompt of MCP server", toolset, prompt_lines)
        ),
    ]


def _builder(
    func: Callable[..., object], intro: str, toolset: ResourceSource, listed: Sequence[str]
) -> Callable[[str], Tool]:
    description = f"{intro} {toolset.name}."
    if listed:
        more = f"\n(and {len(listed) - _LISTED} more)" if len(listed) > _LISTED else ""
        description += " Available:\n" + "\n".join(listed[:_LISTED]) + more

    def build(name: str) -> Tool:
        return FunctionTool(func, name=name, description=description, timeout=toolset.timeout)

    return build


async def _try(fetch: Callable[[], Any]) -> list[Any]:
    try:
        return list(await fetch())
    except MCPError:
        return []  # a server without resources (or prompts) answers "method not found"
