"""MCPServerGroup: several MCP servers (usually from one config file) as one tool provider."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup

from ..exceptions import MCPError, SimpleLLMFuncError
from ..tools import Tool
from ._client import MCPToolset
from ._config import load_config
from ._names import check_unique

__all__ = ["MCPServerGroup"]


class MCPServerGroup:
    """Several :class:`MCPToolset` s that open, list and close together.

    ``async with`` starts every server concurrently; if one fails, the others are stopped and
    the error names it. Tool names must be unique across the servers (the default server-name
    prefixes see to that). ``group["name"]`` is one server's toolset, for its resources and
    prompts.
    """

    def __init__(self, toolsets: Mapping[str, MCPToolset]) -> None:
        self.toolsets = dict(toolsets)
        self._group: TaskGroup | None = None

    @classmethod
    def from_config(
        cls,
        source: str | os.PathLike[str] | Mapping[str, Any],
        *,
        prefix_names: bool = True,
        **options: Any,
    ) -> Self:
        """Build the group from ``{"mcpServers": {...}}`` (see :func:`load_config`).

        Raises:
            ConfigError: For an unreadable or invalid configuration.
        """
        specs = load_config(source)
        return cls(
            {
                name: MCPToolset(spec, name=name, prefix=name if prefix_names else None, **options)
                for name, spec in specs.items()
            }
        )

    def __getitem__(self, name: str) -> MCPToolset:
        return self.toolsets[name]

    def __iter__(self) -> Iterator[MCPToolset]:
        return iter(self.toolsets.values())

    def __len__(self) -> int:
        return len(self.toolsets)

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Open every server concurrently.

        Raises:
            MCPError: Naming every server that could not be started; none is left running.
        """
        if self._group is not None:
            return
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        failures: list[MCPError] = []

        async def attach(toolset: MCPToolset) -> None:
            try:
                await toolset._attach(group)
            except MCPError as exc:
                failures.append(exc)

        try:
            async with anyio.create_task_group() as starting:
                for toolset in self.toolsets.values():
                    starting.start_soon(attach, toolset)
        except BaseException:
            await self.aclose()
            raise
        if failures:
            await self.aclose()
            raise MCPError("; ".join(str(f) for f in failures))

    async def aclose(self) -> None:
        """Close every session and stop every stdio server."""
        group, self._group = self._group, None
        if group is None:
            return
        async with anyio.create_task_group() as closing:
            for toolset in self.toolsets.values():
                closing.start_soon(toolset._detach)
        group.cancel_scope.cancel()
        await group.__aexit__(None, None, None)

    async def list_tools(self) -> list[Tool]:
        """Every server's tools.

        Raises:
            MCPError: When a server cannot be reached or answers badly.
            ToolDefinitionError: When two servers offer the same tool name.
        """
        listed: dict[str, tuple[Tool, ...]] = {}
        failures: list[SimpleLLMFuncError] = []

        async def fetch(name: str, toolset: MCPToolset) -> None:
            try:
                listed[name] = await toolset.list_tools()
            except SimpleLLMFuncError as exc:
                failures.append(exc)

        async with anyio.create_task_group() as fetching:
            for name, toolset in self.toolsets.items():
                fetching.start_soon(fetch, name, toolset)
        if failures:
            raise failures[0]
        check_unique({name: [t.name for t in tools] for name, tools in listed.items()})
        return [tool for name in self.toolsets for tool in listed[name]]

    def __repr__(self) -> str:
        return f"<MCPServerGroup {list(self.toolsets)!r}>"
