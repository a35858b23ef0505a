"""Lazy package exports (PEP 562): a name's module is imported on first access.

Keeps ``import simplellmfunc`` cheap (a CLI that only validates a config file never loads
httpx, jupyter_client or the MCP SDK) while ``from simplellmfunc import llm_chat`` works as usual.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, mapping each name to its module.

    Modules are relative to ``package`` when they start with a dot.
    """

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        globals_of(package)[name] = value  # later lookups are plain attribute hits
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals_of(package)) | set(names))

    return __getattr__, __dir__


def globals_of(package: str) -> dict[str, Any]:
    """The namespace of an imported package."""
    import sys

    return vars(sys.modules[package])
