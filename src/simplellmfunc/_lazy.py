"""A package's face: lazy exports (PEP 562: a name's module is imported on first access) and
public paths (:func:`publish`).

Keeps ``import simplellmfunc`` cheap (a CLI that only validates a config file never loads
httpx, jupyter_client or the MCP SDK) while ``from simplellmfunc import llm_chat`` works as usual.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["lazy_exports", "publish"]


def lazy_exports(
    package: str,
    names: Mapping[str, str],
    *,
    claims: Iterable[str] = (),
    submodules: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, mapping each name to its module.

    Modules are relative to ``package`` when they start with a dot. A name is published
    (:func:`publish`, with ``claims``) when first accessed; ``submodules`` are sub-packages
    reached as attributes (``package.stores``), imported on first access as well.
    """
    owned = (f"{package}._", *(f"{claim}." for claim in claims))
    exact = tuple(claims)
    children = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            if name in children:
                return importlib.import_module(f"{package}.{name}")  # sets the attribute
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        _claim(value, package, owned, exact)
        globals_of(package)[name] = value  # later lookups are plain attribute hits
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals_of(package)) | set(names) | children)

    return __getattr__, __dir__


def globals_of(package: str) -> dict[str, Any]:
    """The namespace of an imported package."""
    return vars(sys.modules[package])


def publish(package: str, names: Iterable[str], *, claims: Iterable[str] = ()) -> None:
    """Give the classes and functions ``package`` exports their public path.

    A name defined in one of the package's private modules (``package._x``), or in one of
    the ``claims`` modules, gets ``__module__ = package``, so that reprs, tracebacks, docs and
    pickles show ``simplellmfunc.engine.Run`` rather than ``simplellmfunc.engine._run.Run``.
    A name some other public package published first keeps its path. Names not imported yet
    (lazy exports) are published when first accessed (:func:`lazy_exports`).
    """
    namespace = globals_of(package)
    owned = (f"{package}._", *(f"{claim}." for claim in claims))
    exact = tuple(claims)
    for name in names:
        if name in namespace:
            _claim(namespace[name], package, owned, exact)


def _claim(value: Any, package: str, owned: tuple[str, ...], exact: tuple[str, ...]) -> None:
    if not (isinstance(value, type) or inspect.isfunction(value)):
        return
    module = value.__module__
    if not isinstance(module, str) or not (module.startswith(owned) or module in exact):
        return
    if isinstance(value, type) and not _resolve_annotations(value):
        return  # its annotations name what only its own module knows: the path stays
    value.__module__ = package


def _resolve_annotations(cls: type) -> bool:
    """Replace the class's own string annotations by what they name, while ``__module__``
    still points at the module that can resolve them (``typing.get_type_hints`` and pydantic
    look names up in ``sys.modules[cls.__module__]``). Returns whether all of them resolved.
    """
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063 - edited in place, not a copy
    if not own or not any(isinstance(a, str) for a in own.values()):
        return True
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception:  # boundary: a name only a TYPE_CHECKING block knows; keep the path
        return False
    for name in own:
        own[name] = hints[name]
    return True
