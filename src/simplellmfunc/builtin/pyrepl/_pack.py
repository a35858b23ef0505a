"""``PrimitivePack``: host functions that kernel code calls as ``runtime.<namespace>.<name>()``."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ...exceptions import UserError

__all__ = ["Primitive", "PrimitivePack"]

F = TypeVar("F", bound=Callable[..., Any])
_NAMESPACE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SEGMENT = r"[A-Za-z][A-Za-z0-9_]*(\[\])?"
_NAME = re.compile(rf"^{_SEGMENT}(\.{_SEGMENT})*$")


@dataclass(frozen=True, slots=True)
class Primitive:
    """One host function: its dotted ``name`` inside the pack, and its contract for the model."""

    name: str
    func: Callable[..., Any]
    contract: str
    timeout: float | None = None


def _contract(name: str, func: Callable[..., Any]) -> str:
    try:
        signature = str(inspect.signature(func, eval_str=True))
    except Exception:  # boundary: unresolvable annotations only make the contract less pretty
        try:
            signature = str(inspect.signature(func))
        except (TypeError, ValueError):
            signature = "(...)"
    doc = (inspect.getdoc(func) or "").strip().split("\n\n", 1)[0].replace("\n", " ")
    head = f"{name}{signature}"
    return f"{head}: {doc}" if doc else head


class PrimitivePack:
    """A namespace of host functions callable from code running in a :class:`PyRepl` kernel.

    Kernel code calls ``runtime.<namespace>.<name>(*args, **kwargs)``; arguments and results
    cross the boundary as JSON (pydantic-serialisable results are converted), exceptions come
    back as ``runtime``'s ``BridgeError`` carrying the host exception's type name and message.
    ``runtime.list_primitives()`` and ``runtime.help()`` list every primitive with its contract.

    Names are dotted (``"context.inspect"``); a ``[]`` segment takes the key given with ``[...]``
    in the kernel as the first argument: ``"memory[].count"`` is called by
    ``runtime.<namespace>.memory["main"].count()`` as ``count("main")``.

    Primitives run on the host's event loop: async functions are awaited, sync functions are
    called directly and must return quickly.

    Args:
        namespace: The attribute of ``runtime`` the pack lives under (an identifier).
        primitives: Name to callable; more can be added with :meth:`add` / :meth:`primitive`.
        description: One line shown in listings.
        backend: The host object behind the pack (what ``PyRepl.get_runtime_backend`` returns).
        timeout: Default per-call timeout in seconds.

    Raises:
        UserError: For an invalid namespace or primitive name.
    """

    def __init__(
        self,
        namespace: str,
        primitives: Mapping[str, Callable[..., Any]] | None = None,
        *,
        description: str = "",
        backend: Any = None,
        timeout: float = 30.0,
    ) -> None:
        if not _NAMESPACE.match(namespace):
            raise UserError(f"invalid primitive pack namespace {namespace!r}: use an identifier")
        self.namespace = namespace
        self.description = description
        self.backend = backend
        self.timeout = timeout
        self._primitives: dict[str, Primitive] = {}
        for name, func in (primitives or {}).items():
            self.add(name, func)

    def add(
        self,
        name: str,
        func: Callable[..., Any],
        *,
        contract: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """Add (or replace) the primitive ``name``.

        Raises:
            UserError: For an invalid name or a non-callable.
        """
        if not _NAME.match(name):
            raise UserError(f"invalid primitive name {name!r}: use dotted identifiers")
        if not callable(func):
            raise UserError(f"primitive {name!r} is not callable")
        self._primitives[name] = Primitive(name, func, contract or _contract(name, func), timeout)

    def primitive(
        self, name: str | None = None, *, contract: str | None = None, timeout: float | None = None
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`add` (the name defaults to the function name)."""

        def register(func: F) -> F:
            self.add(name or func.__name__, func, contract=contract, timeout=timeout)
            return func

        return register

    def get(self, name: str) -> Primitive | None:
        """The primitive called ``name``, if any."""
        return self._primitives.get(name)

    @property
    def primitives(self) -> tuple[Primitive, ...]:
        """Every primitive, in insertion order."""
        return tuple(self._primitives.values())

    def __repr__(self) -> str:
        return f"PrimitivePack({self.namespace!r}, {len(self._primitives)} primitives)"
