"""The SimpleLLMFunc migration layer's one helper: a module ``__getattr__`` that imports our
objects under SimpleLLMFunc's names on first access, and makes names that are gone fail with
the replacement in the message (``from simplellmfunc.x import Gone`` raises at once)."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any

from .exceptions import UnsupportedError

__all__ = [
    "FORK_TASK_PARAM",
    "KEY_OVERRIDE_PARAM",
    "TOOLKIT_OVERRIDE_PARAM",
    "compat_getattr",
    "keep_package_attributes",
]

# SimpleLLMFunc's SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM: a ``_template_params`` key whose
# value replaces the decorator's toolkit for one call.
TOOLKIT_OVERRIDE_PARAM = "__self_reference_toolkit_override"
# SimpleLLMFunc's per-call memory key (refused here: the key is the decorator's
# self_reference_key=) and a fork's task (dropped: forks get it from fork.spawn(task)).
KEY_OVERRIDE_PARAM = "__self_reference_key_override"
FORK_TASK_PARAM = "__self_reference_fork_task"


def compat_getattr(
    module: str,
    aliases: Mapping[str, tuple[str, str]] | None = None,
    gone: Mapping[str, str] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``.

    Args:
        module: The module's ``__name__``.
        aliases: SimpleLLMFunc name → (our module, relative to ``simplellmfunc`` when it starts
            with a dot; our name), imported on first access.
        gone: SimpleLLMFunc name → what to use instead; accessing it raises
            :class:`~simplellmfunc.exceptions.UnsupportedError`.
    """
    aliases = dict(aliases or {})
    gone = dict(gone or {})

    def __getattr__(name: str) -> Any:
        target = aliases.get(name)
        if target is not None:
            return getattr(importlib.import_module(target[0], "simplellmfunc"), target[1])
        instead = gone.get(name)
        if instead is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        old = module.replace("simplellmfunc", "SimpleLLMFunc", 1)
        raise UnsupportedError(
            f"{old}.{name} has no counterpart in simplellmfunc: {instead} "
            "(see the 'Coming from SimpleLLMFunc' page of the docs)"
        )

    return __getattr__


def keep_package_attributes(package: str, *names: str) -> None:
    """Importing submodule ``package.<name>`` does not rebind the package's attribute ``name``.

    SimpleLLMFunc has modules named as the object they export (``tool.tool``,
    ``observability.langfuse_client``); Python's import sets the package attribute to the
    submodule, so ``from package import name`` would then give the module, not the object.
    """
    module = sys.modules[package]
    kept = frozenset(names)
    base = type(module)

    class _KeepsAttributes(base):  # type: ignore[valid-type,misc]
        def __setattr__(self, name: str, value: Any) -> None:
            if name in kept and isinstance(value, types.ModuleType):
                return
            super().__setattr__(name, value)

    module.__class__ = _KeepsAttributes
