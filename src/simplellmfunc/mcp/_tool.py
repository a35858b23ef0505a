"""MCPTool: a tool of an MCP server, with the server's own input schema."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Protocol

import mcp.types as types
from jsonschema import SchemaError  # type: ignore[import-untyped]
from jsonschema.validators import validator_for  # type: ignore[import-untyped]
from referencing import Registry
from referencing.exceptions import Unresolvable

from ..exceptions import MCPError
from ..tools import ArgumentsError, Tool, ToolContext
from ._results import MCPResult

__all__ = ["MCPTool", "ToolCaller", "model_schema"]

logger = logging.getLogger("simplellmfunc.mcp")

_MAX_PROBLEMS = 5


def model_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema as providers receive it: the server's, as an object schema.

    ``$schema`` is dropped (some providers reject it); everything else passes through.
    """
    cleaned = {k: v for k, v in schema.items() if k != "$schema"}
    cleaned.setdefault("type", "object")
    if cleaned["type"] == "object":
        cleaned.setdefault("properties", {})
    return cleaned


class ToolCaller(Protocol):
    """What an :class:`MCPTool` needs of its toolset: calls on the server's session.

    ``MCPToolset`` is the one implementation; the protocol keeps this module below it.
    """

    async def _call_tool(
        self,
        server_name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        context: ToolContext | None,
    ) -> MCPResult: ...


class MCPTool(Tool):
    """A tool offered by an MCP server; calls go through its :class:`MCPToolset`'s session.

    The model sees the server's input schema and description under a provider-safe name;
    arguments are checked against the schema before they are sent. Calling the tool returns
    an :class:`MCPResult`; a result the server flags as an error raises :class:`MCPError`, which
    a run shows the model as an error result.

    Attributes:
        server_name: The tool's name on the server.
        toolset: The toolset that owns the session.
    """

    def __init__(
        self, toolset: ToolCaller, spec: types.Tool, name: str, timeout: float | None
    ) -> None:
        self.toolset = toolset
        self.server_name = spec.name
        self.input_schema = model_schema(spec.input_schema)
        self.output_schema = spec.output_schema
        self.annotations = spec.annotations
        self._validator = _compile(spec.input_schema, spec.name)
        description = spec.description or spec.title or f"The {spec.name} tool of an MCP server."
        super().__init__(name=name, description=description, timeout=timeout)

    @property
    def parameters(self) -> dict[str, Any]:
        """The server's JSON schema of the arguments."""
        return self.input_schema

    def validate(self, arguments: Mapping[str, Any]) -> None:
        """Check ``arguments`` against the server's input schema.

        Raises:
            ArgumentsError: Naming the problems, in words the model can act on.
        """
        if self._validator is None:
            return
        try:
            errors = list(self._validator.iter_errors(dict(arguments)))
        except Unresolvable:
            return  # a $ref we cannot follow: the server will judge the arguments
        if errors:
            problems = [_problem(e) for e in errors[:_MAX_PROBLEMS]]
            raise ArgumentsError("invalid arguments: " + "; ".join(problems))

    async def invoke(
        self, arguments: Mapping[str, Any], context: ToolContext | None = None
    ) -> MCPResult:
        """Validate ``arguments`` and call the tool on the server.

        Progress notifications become ``mcp_progress`` custom events on the context's emitter;
        the context's abort signal cancels the request on the server.

        Raises:
            ArgumentsError: When the arguments do not match the input schema.
            MCPError: When the server flags the result as an error, times out or fails.
            AbortedError: When the abort signal fires during the call.
        """
        self.validate(arguments)
        result = await self.toolset._call_tool(
            self.server_name, dict(arguments), self.timeout, context
        )
        if result.is_error:
            text = result.text or "no details"
            raise MCPError(f"tool {self.server_name!r} reported an error: {text}")
        return result

    async def run(self, **kwargs: Any) -> MCPResult:
        """Call the tool on the server with ``kwargs`` as its arguments."""
        return await self.invoke(kwargs)

    async def __call__(self, **kwargs: Any) -> MCPResult:
        """Call the tool directly with keyword arguments.

        Raises:
            ArgumentsError: When the arguments do not match the input schema.
            MCPError: When the server flags the result as an error, times out or fails.
        """
        return await self.invoke(kwargs)

    def render(self, result: Any) -> Any:
        """Text, or ``(text, images)`` when the result has images."""
        return result.for_model() if isinstance(result, MCPResult) else result


def _compile(schema: Mapping[str, Any], name: str) -> Any:
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except SchemaError as exc:
        logger.warning("MCP tool %r has an invalid input schema (%s); not checked", name, exc)
        return None
    # An empty registry: $refs resolve inside the schema, nothing is fetched from the network.
    return cls(schema, registry=Registry())


def _problem(error: Any) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"
