"""A tool whose one parameter is a task in words: agents used as tools, local or remote."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..exceptions import UserError
from ._tool import Tool, ToolContext

__all__ = ["TaskTool"]


class TaskTool(Tool):
    """A :class:`Tool` that takes one required string, ``task``; subclasses implement
    :meth:`answer`."""

    @property
    def parameters(self) -> dict[str, Any]:
        """One required string: the task."""
        return {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The task for the agent, in full."}
            },
            "required": ["task"],
        }

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None = None) -> str:
        """Check ``task`` and hand it to :meth:`answer`.

        Raises:
            UserError: If ``task`` is missing or not a string.
        """
        task = arguments.get("task")
        if not isinstance(task, str):
            raise UserError(f"tool {self.name}: 'task' must be a string")
        return await self.answer(task, context)

    async def answer(self, task: str, context: ToolContext | None) -> str:
        """The answer to ``task``."""
        raise NotImplementedError

    async def run(self, task: str) -> str:
        """Run the tool on ``task`` (its one parameter)."""
        return await self.invoke({"task": task})
