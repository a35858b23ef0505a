"""Reversible mapping between MCP tool names and the names model providers accept."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..exceptions import ToolDefinitionError

__all__ = ["NameMap", "check_unique", "model_name"]

_VALID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INVALID_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX = 64
_DIGEST = 8


def model_name(name: str, prefix: str | None = None) -> str:
    """The provider-safe name for MCP tool ``name`` (``^[a-zA-Z0-9_-]{1,64}$``).

    A valid ``prefix_name`` is kept as is; otherwise other characters become ``_``, and a name
    still too long keeps its head plus a short hash of the original, so long names that share a
    head stay distinct.
    """
    full = f"{prefix}_{name}" if prefix else name
    if _VALID.match(full):
        return full
    cleaned = _INVALID_CHARS.sub("_", full) or "_"
    if len(cleaned) <= _MAX:
        return cleaned
    digest = hashlib.sha256(full.encode("utf-8")).hexdigest()[:_DIGEST]
    return f"{cleaned[: _MAX - _DIGEST - 1]}_{digest}"


@dataclass(frozen=True, slots=True)
class NameMap:
    """Model-facing names of one server's tools and the server names they stand for."""

    to_server: Mapping[str, str]

    @classmethod
    def build(cls, names: Iterable[str], prefix: str | None, server: str) -> NameMap:
        """Map every server tool name; two that map to one model name are an error.

        Raises:
            ToolDefinitionError: Naming both server tools and the shared model name.
        """
        mapping: dict[str, str] = {}
        for name in names:
            mapped = model_name(name, prefix)
            other = mapping.get(mapped)
            if other is not None:
                raise ToolDefinitionError(
                    f"MCP server {server!r}: tools {other!r} and {name!r} both map to the tool "
                    f"name {mapped!r}; give the toolset a prefix or rename one on the server"
                )
            mapping[mapped] = name
        return cls(mapping)

    def server_name(self, mapped: str) -> str:
        """The server's name for the model-facing ``mapped`` (``mapped`` itself if unknown)."""
        return self.to_server.get(mapped, mapped)

    def model_names(self) -> dict[str, str]:
        """Server name → model-facing name."""
        return {server: mapped for mapped, server in self.to_server.items()}


def check_unique(owners: Mapping[str, Iterable[str]]) -> None:
    """Check that no model-facing tool name is offered by two servers.

    Args:
        owners: Server label → the model-facing names of its tools.

    Raises:
        ToolDefinitionError: Naming the tool and both servers.
    """
    seen: dict[str, str] = {}
    for owner, names in owners.items():
        for name in names:
            first = seen.setdefault(name, owner)
            if first != owner:
                raise ToolDefinitionError(
                    f"tool name {name!r} is offered by MCP servers {first!r} and {owner!r}; "
                    "give one of them a prefix"
                )
