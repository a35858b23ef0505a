"""Builtins: ``PyRepl`` (a Jupyter kernel as a code tool), ``SelfReference`` (agent memory) and
``FileToolset`` (workspace file tools).

Each is imported on first access: PyRepl pulls in jupyter_client, which users of the file
tools should not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._selfref import SelfReference
    from .files import FileToolset
    from .pyrepl import KernelPool, PrimitivePack, PyRepl

__all__ = ["FileToolset", "KernelPool", "PrimitivePack", "PyRepl", "SelfReference"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FileToolset": ".files",
        "KernelPool": ".pyrepl",
        "PrimitivePack": ".pyrepl",
        "PyRepl": ".pyrepl",
        "SelfReference": "._selfref",
    },
)
