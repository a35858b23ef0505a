"""Builtins, one sub-package each:

* :mod:`.pyrepl` — ``PyRepl``, a Jupyter kernel as a code tool (kernel process, session, bridge,
  pool, tools);
* :mod:`.selfref` — ``SelfReference``, agent-editable memory (store, run hook, forks);
* :mod:`.files` — ``FileToolset``, workspace file tools.

``selfref`` builds on ``pyrepl``'s public names (kernel code reaches memory through a primitive
pack; forks get fresh REPLs) and registers SelfReference as a PyRepl's default memory backend;
``pyrepl`` never imports ``selfref``. ``files`` stands alone. Each name is imported on first access:
PyRepl pulls in jupyter_client, which users of the file tools should not pay for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_exports, publish

if TYPE_CHECKING:
    from .files import FileToolset
    from .pyrepl import (
        CellLimits,
        KernelPool,
        KernelSettings,
        PrimitivePack,
        PyRepl,
        code_touches_system,
    )
    from .selfref import SelfReference

__all__ = [
    "CellLimits",
    "FileToolset",
    "KernelPool",
    "KernelSettings",
    "PrimitivePack",
    "PyRepl",
    "SelfReference",
    "code_touches_system",
]

_export, __dir__ = lazy_exports(
    __name__,
    {
        "CellLimits": ".pyrepl",
        "FileToolset": ".files",
        "KernelPool": ".pyrepl",
        "KernelSettings": ".pyrepl",
        "PrimitivePack": ".pyrepl",
        "PyRepl": ".pyrepl",
        "SelfReference": ".selfref",
        "code_touches_system": ".pyrepl",
    },
)


def __getattr__(name: str) -> Any:
    if name in _REPL_NAMES:
        # A PyRepl from here has a SelfReference as its default memory, as in SimpleLLMFunc
        # (``pyrepl`` never imports ``selfref``: that is the seam). ``selfref`` registers it
        # when imported; until then a factory that imports it on first use stands in, so a
        # PyRepl that never asks for its memory does not load selfref and the engine with it.
        pyrepl = importlib.import_module(".pyrepl", __name__)
        if pyrepl.default_backend("selfref") is None:
            pyrepl.register_default_backend("selfref", _self_reference)
    return _export(name)


def _self_reference() -> Any:
    """A fresh SelfReference (the default memory of a PyRepl got from here)."""
    return importlib.import_module(".selfref", __name__).SelfReference()


_REPL_NAMES = frozenset({"KernelPool", "PrimitivePack", "PyRepl"})

publish(__name__, __all__)
