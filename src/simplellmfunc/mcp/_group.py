"""LinkGroup: several server links that open, list and close together.

The mechanism only; :class:`~simplellmfunc.mcp.MCPServerGroup` (beside ``M``, which it
is built from) adds the configuration file and the toolset type. This module knows neither, so
the client's modules import in one direction.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup

from .._resource import AsyncResource
from ..exceptions import MCPError, SimpleLLMFuncError
from ..tools import Tool
from ._names import check_unique

__all__ = ["LinkGroup", "Member"]


class Member(Protocol):
    """What a group needs of each server: join the group's task group, leave it, list tools."""

    async def _attach(self, group: TaskGroup) -> None: ...

    async def _detach(self) -> None: ...

    async def list_tools(self) -> Sequence[Tool]: ...


M = TypeVar("M", bound=Member)


class LinkGroup(AsyncResource, Generic[M]):
    """Several servers that open, list and close together.

    ``async with`` starts every server concurrently; if one fails, the others are stopped and
    the error names it. Tool names must be unique across the servers (the default server-name
    prefixes see to that). ``group["name"]`` is one server's toolset, for its resources and
    prompts.
    """

    def __init__(self, toolsets: Mapping[str, M]) -> None:
        self.toolsets = dict(toolsets)
        self._group: TaskGroup | None = None

    def __getitem__(self, name: str) -> M:
        return self.toolsets[name]

    def __iter__(self) -> Iterator[M]:
        return iter(self.toolsets.values())

    def __len__(self) -> int:
        return len(self.toolsets)

    async def connect(self) -> None:
        """The earlier name of :meth:`open`.

        Raises:
            MCPError: As :meth:`open`.
        """
        await self.open()

    async def open(self) -> None:
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

        async def attach(toolset: M) -> None:
            try:
                await toolset._attach(group)
            except MCPError as exc:
                failures.append(exc)

        try:
            async with anyio.create_task_group() as starting:
                for toolset in self.toolsets.values():
                    starting.start_soon(attach, toolset)
        except BaseException:  # boundary: cleanup, re-raised: the toolsets attached are closed
            await self.aclose()
            raise
        if failures:
            await self.aclose()
            if len(failures) == 1:
                raise failures[0]  # keeps a stdio server's exit code and stderr tail
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
        listed: dict[str, Sequence[Tool]] = {}
        failures: list[SimpleLLMFuncError] = []

        async def fetch(name: str, toolset: M) -> None:
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
        return f"<{type(self).__name__} {list(self.toolsets)!r}>"
