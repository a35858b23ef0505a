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
    "primitive_entry",
    "register_default_backend",
]

F = TypeVar("F", bound=Callable[..., Any])
_NAMESPACE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_SEGMENT = r"[A-Za-z][A-Za-z0-9_]*(\[\])?"
_NAME = re.compile(rf"^{_SEGMENT}(\.{_SEGMENT})*$")


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


@dataclass(frozen=True, slots=True)
class Primitive:
    """One host function: its dotted ``name`` inside the pack, and its contract for the model.

    ``parameters`` describes the arguments the model passes (``ctx`` of a ``pass_context``
    pack left out): ``{"name", "kind", "type", "required"}`` and ``"default"`` when optional,
    ``kind`` being one of SimpleLLMFunc's ``positional_only`` / ``positional_or_keyword`` /
    ``keyword_only`` / ``var_positional`` / ``var_keyword`` (``*args`` and ``**kwargs`` are
    named ``"*args"`` / ``"**kwargs"``).
    """

    name: str
    func: Callable[..., Any]
    contract: str
    timeout: float | None = None
    description: str = ""
    parameters: tuple[Mapping[str, Any], ...] = ()
    signature: inspect.Signature | None = None

    @property
    def requirements(self) -> str:
        """``"Parameter requirements: text(str, required), key(str, optional, default
        None)"``: the hint a bad call gets."""
        if not self.parameters:
            return "Parameter requirements: no arguments."
        parts = []
        for item in self.parameters:
            need = "required" if item["required"] else f"optional, default {item['default']}"
            parts.append(f"{item['name']}({item['type']}, {need})")
        return "Parameter requirements: " + ", ".join(parts)

    def check_arguments(
        self, args: list[Any], kwargs: Mapping[str, Any], target: str | None = None
    ) -> None:
        """Raise a ``TypeError`` naming :attr:`requirements` when the arguments do not fit the
        signature (``args`` includes ``ctx`` for a ``pass_context`` pack; ``target``: the
        ``"namespace.name"`` the message names)."""
        if self.signature is None:
            return
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            name = target or self.name
            raise TypeError(f"runtime.{name}(): {exc}. {self.requirements}") from None


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


def _full_signature(func: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(func, eval_str=True)
    except Exception:  # boundary: unresolvable annotations only make the contract less pretty
        try:
            return inspect.signature(func)
        except (TypeError, ValueError):
            return None


def _model_signature(signature: inspect.Signature, skip_first: bool) -> inspect.Signature:
    if skip_first:
        return signature.replace(parameters=list(signature.parameters.values())[1:])
    return signature


def _type_name(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "any"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


_STARS: dict[Any, str] = {
    inspect.Parameter.VAR_POSITIONAL: "*",
    inspect.Parameter.VAR_KEYWORD: "**",
}


def _parameters(signature: inspect.Signature) -> tuple[dict[str, Any], ...]:
    out = []
    prefix = _STARS
    for param in signature.parameters.values():
        required = param.default is inspect.Parameter.empty and param.kind not in prefix
        item: dict[str, Any] = {
            "name": prefix.get(param.kind, "") + param.name,
            "kind": _KINDS[param.kind],
            "type": _type_name(param.annotation),
            "required": required,
        }
        if param.default is not inspect.Parameter.empty:
            item["default"] = repr(param.default)
        out.append(item)
    return tuple(out)


def _summary(func: Callable[..., Any]) -> str:
    return (inspect.getdoc(func) or "").strip().split("\n\n", 1)[0].replace("\n", " ")


def _contract(name: str, signature: inspect.Signature | None, description: str) -> str:
    head = f"{name}{'(...)' if signature is None else signature}"
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
        full = _full_signature(func)
        shown = None if full is None else _model_signature(full, self.pass_context)
        contract = contract or _contract(name, shown, description)
        parameters = () if shown is None else _parameters(shown)
        self._primitives[name] = Primitive(
            name, func, contract, timeout, description, parameters, full
        )

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


def primitive_entry(pack: PrimitivePack, primitive: Primitive) -> dict[str, Any]:
    """One primitive as ``runtime.list_primitives()`` lists it: ``name`` (with the namespace),
    ``contract``, ``description``, ``pack`` (the pack's description) and ``parameters``."""
    return {
        "name": f"{pack.namespace}.{primitive.name}",
        "contract": primitive.contract,
        "description": primitive.description,
        "pack": pack.description,
        "parameters": [dict(p) for p in primitive.parameters],
    }


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
