"""``PrimitivePack``: host functions that kernel code calls as ``runtime.<namespace>.<name>()``."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from ...exceptions import UserError

__all__ = [
    "Primitive",
    "PrimitiveCallContext",
    "PrimitivePack",
    "default_backend",
    "pack_backends",
    "register_default_backend",
]

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
    description: str = ""


@dataclass(frozen=True, slots=True)
class PrimitiveCallContext:
    """What a handler of a ``pass_context`` pack gets as its first argument (``ctx``).

    Attributes:
        primitive_name: The called primitive, ``"<namespace>.<name>"``.
        backend_name: The pack's namespace.
        backend: The pack's backend object.
        call_id: The id of the call, unique within the kernel.
        backends: Every installed pack's backend by namespace (see :meth:`get_backend`).
    """

    primitive_name: str
    backend_name: str
    backend: Any
    call_id: str
    backends: Mapping[str, Any]

    def get_backend(self, name: str) -> Any:
        """The backend of the pack installed under ``name``, or ``None``."""
        return self.backends.get(name)


def _signature(func: Callable[..., Any], skip_first: bool) -> str:
    try:
        signature = inspect.signature(func, eval_str=True)
    except Exception:  # boundary: unresolvable annotations only make the contract less pretty
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):
            return "(...)"
    if skip_first:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return str(signature)


def _summary(func: Callable[..., Any]) -> str:
    return (inspect.getdoc(func) or "").strip().split("\n\n", 1)[0].replace("\n", " ")


def _contract(name: str, func: Callable[..., Any], description: str, skip_first: bool) -> str:
    head = f"{name}{_signature(func, skip_first)}"
    return f"{head}: {description}" if description else head


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
    called directly and must return quickly. With ``pass_context=True`` (SimpleLLMFunc's handler
    shape, what ``PyRepl.pack`` makes) every handler gets a :class:`PrimitiveCallContext` as its
    first argument, ``ctx``: ``ctx.backend`` is this pack's backend.

    Args:
        namespace: The attribute of ``runtime`` the pack lives under (an identifier).
        primitives: Name to callable; more can be added with :meth:`add` / :meth:`primitive`.
        description: One line shown in listings.
        backend: The host object behind the pack (what ``PyRepl.get_runtime_backend`` returns).
        timeout: Default per-call timeout in seconds.
        pass_context: Call handlers as ``handler(ctx, *args, **kwargs)``.

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
        pass_context: bool = False,
    ) -> None:
        if not _NAMESPACE.match(namespace):
            raise UserError(f"invalid primitive pack namespace {namespace!r}: use an identifier")
        self.namespace = namespace
        self.description = description
        self.backend = backend
        self.timeout = timeout
        self.pass_context = pass_context
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
        description: str = "",
    ) -> None:
        """Add (or replace) the primitive ``name``.

        The contract the model reads defaults to the signature (without ``ctx`` in a
        ``pass_context`` pack) and ``description``, else the docstring's first paragraph.

        Raises:
            UserError: For an invalid name or a non-callable.
        """
        if not _NAME.match(name):
            raise UserError(f"invalid primitive name {name!r}: use dotted identifiers")
        if not callable(func):
            raise UserError(f"primitive {name!r} is not callable")
        description = description or _summary(func)
        contract = contract or _contract(name, func, description, self.pass_context)
        self._primitives[name] = Primitive(name, func, contract, timeout, description)

    def primitive(
        self,
        name: str | None = None,
        *,
        contract: str | None = None,
        timeout: float | None = None,
        description: str = "",
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`add` (the name defaults to the function name)."""

        def register(func: F) -> F:
            self.add(
                name or func.__name__,
                func,
                contract=contract,
                timeout=timeout,
                description=description,
            )
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


def pack_backends(packs: Mapping[str, PrimitivePack]) -> dict[str, Any]:
    """The backend objects of the packs that have one, by namespace."""
    return {name: pack.backend for name, pack in packs.items() if pack.backend is not None}


# The backends a PyRepl attaches on first request, by namespace. Packages above this one
# register theirs (``selfref`` registers SelfReference), so this package never imports them:
# the seam that keeps PyRepl and SelfReference out of an import circle.
_DEFAULT_BACKENDS: dict[str, Callable[[], Any]] = {}


def register_default_backend(namespace: str, factory: Callable[[], Any]) -> None:
    """Make ``factory()`` the backend a PyRepl attaches when ``namespace`` is asked for and
    none is installed (``repl.get_runtime_backend(namespace)``)."""
    _DEFAULT_BACKENDS[namespace] = factory


def default_backend(namespace: str) -> Callable[[], Any] | None:
    """The factory registered for ``namespace``, if any."""
    return _DEFAULT_BACKENDS.get(namespace)
