"""Builtins: ``PyRepl`` (a Jupyter kernel as a code tool), ``SelfReference`` (agent memory) and
``FileToolset`` (workspace file tools).

Each is imported on first access: PyRepl pulls in jupyter_client, which users of the file
tools should not pay for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from ._bridge_pack import PrimitivePack
    from ._kernel_pool import KernelPool
    from ._pyrepl import PyRepl
    from ._selfref import SelfReference
    from .files import FileToolset

__all__ = ["FileToolset", "KernelPool", "PrimitivePack", "PyRepl", "SelfReference"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FileToolset": ".files",
        "KernelPool": "._kernel_pool",
        "PrimitivePack": "._bridge_pack",
        "PyRepl": "._pyrepl",
        "SelfReference": "._selfref",
    },
)
