"""The host-primitives face of a :class:`~._repl.PyRepl`: primitive packs that kernel code
calls as ``runtime.<namespace>.<name>(...)``, their backend objects, and the attached
SelfReference (``self_reference`` in the kernel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ...exceptions import ArgumentValueError, UnknownPackError, UnsupportedError, UserError
from ._managed import ManagedKernel
from ._pack import PrimitivePack, default_backend, pack_backends, primitive_entry

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["SELF_REFERENCE", "PrimitiveHost"]

SELF_REFERENCE = "selfref"
"""The namespace of the SelfReference backend, always there, as in SimpleLLMFunc."""


def _new_self_reference() -> Any:
    """A fresh in-memory SelfReference: what ``selfref`` registered as the default backend (it
    builds on this package, so this package never imports it).

    Raises:
        UserError: If ``simplellmfunc.builtin.selfref`` was not imported.
    """
    factory = default_backend(SELF_REFERENCE)
    if factory is None:
        raise UserError(
            "no SelfReference is registered: import simplellmfunc.builtin.selfref (the "
            "simplellmfunc.builtin names do), or attach one with repl.attach_self_reference()"
        )
    return factory()


class PrimitiveHost:
    """Primitive packs and runtime backends of one kernel (a base of ``PyRepl``)."""

    DEFAULT_SELF_REFERENCE_BACKEND_NAME = SELF_REFERENCE

    _kernel: ManagedKernel
    _self_reference: Any

    def install_primitive_pack(self, pack: PrimitivePack | str, *, backend: Any = None) -> None:
        """Make ``pack`` callable from kernel code as ``runtime.<pack.namespace>.<name>(...)``.

        Takes effect at the next execution; replaces a pack with the same namespace. A name
        instead of a pack installs the pack registered under it, as SimpleLLMFunc does:
        ``"selfref"`` attaches ``backend`` (a SelfReference; default: a fresh one).

        Raises:
            UnknownPackError: For a name no pack is registered under (a ``KeyError``).
            ArgumentValueError: For anything else than a pack or a name.
        """
        if isinstance(pack, str):
            if pack != SELF_REFERENCE:
                raise UnknownPackError(
                    f"no primitive pack named {pack!r}: the named pack is {SELF_REFERENCE!r}; "
                    "install others as a PrimitivePack (repl.pack(name, backend=...))"
                )
            self.attach_self_reference(backend if backend is not None else _new_self_reference())
            return
        if not isinstance(pack, PrimitivePack):
            raise ArgumentValueError(f"install_primitive_pack needs a PrimitivePack, got {pack!r}")
        self._kernel.packs[pack.namespace] = pack
        self._kernel.invalidate()

    def install_pack(self, pack: PrimitivePack, *, replace: bool = False) -> None:
        """:meth:`install_primitive_pack`, refusing to replace a pack unless ``replace``
        (SimpleLLMFunc's name).

        Raises:
            UserError: If a pack is installed under the namespace and ``replace`` is false.
        """
        if pack.namespace in self._kernel.packs and not replace:
            raise UserError(f"a primitive pack is already installed under {pack.namespace!r}")
        self.install_primitive_pack(pack)

    def pack(
        self, name: str, *, backend: Any, backend_name: str | None = None, guidance: str = ""
    ) -> PrimitivePack:
        """A new :class:`PrimitivePack` under namespace ``name`` whose handlers get ``ctx``
        (a :class:`PrimitiveCallContext`; ``ctx.backend`` is ``backend``) as their first
        argument, as SimpleLLMFunc's ``repl.pack`` makes them; install it with
        :meth:`install_pack`.

        Raises:
            UnsupportedError: For a ``backend_name`` other than ``name``.
        """
        if backend_name not in (None, name):
            raise UnsupportedError(
                "a primitive pack's backend is named by its namespace here: use "
                f"repl.pack({backend_name!r}, backend=...)"
            )
        return PrimitivePack(name, description=guidance, backend=backend, pass_context=True)

    def get_runtime_backend(self, name: str) -> Any:
        """The backend object of the pack installed under namespace ``name`` (or the pack
        itself when it has none); ``None`` when no such pack is installed.

        ``"selfref"`` is always there, as in SimpleLLMFunc: when no SelfReference is attached,
        asking for it attaches a fresh in-memory one (:meth:`attach_self_reference`).
        """
        pack = self._kernel.packs.get(name)
        default = name == self.DEFAULT_SELF_REFERENCE_BACKEND_NAME
        if pack is None and default and self._self_reference is None:
            self.attach_self_reference(_new_self_reference())
            pack = self._kernel.packs.get(name)
        if pack is None:
            return None
        return pack.backend if pack.backend is not None else pack

    def list_runtime_backends(self) -> list[str]:
        """The namespaces of the installed packs that have a backend object, sorted."""
        return sorted(pack_backends(self._kernel.packs))

    def register_runtime_backend(self, name: str, backend: Any, *, replace: bool = False) -> None:
        """Make ``backend`` the backend of namespace ``name`` (SimpleLLMFunc's name): the
        ``ctx.backend`` of the primitives :meth:`primitive` adds there. An empty pack is
        installed under ``name`` if none is; ``"selfref"`` attaches ``backend`` as the
        SelfReference (:meth:`attach_self_reference`).

        Raises:
            ArgumentValueError: For a ``None`` backend, or a namespace that already has one
                and ``replace`` is false.
        """
        if backend is None:
            raise ArgumentValueError("backend must not be None")
        pack = self._kernel.packs.get(name)
        if pack is not None and pack.backend is not None and not replace:
            raise ArgumentValueError(f"runtime backend {name!r} is already registered")
        if name == SELF_REFERENCE:  # its pack is built from the SelfReference
            self.attach_self_reference(backend)
            return
        if pack is None:
            self.install_primitive_pack(PrimitivePack(name, backend=backend, pass_context=True))
            return
        pack.backend = backend
        self._kernel.invalidate()

    def primitive(
        self,
        name: str,
        *,
        backend: str | None = None,
        description: str = "",
        contract: str | None = None,
        timeout: float | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]:
        """Decorator: add the handler as primitive ``"<namespace>.<name>"`` of the pack under
        that namespace (SimpleLLMFunc's ``repl.primitive``); the handler gets ``ctx`` first
        (``ctx.backend``: the namespace's backend, see :meth:`register_runtime_backend`). An
        empty pack is installed under the namespace if none is.

        Raises:
            UnsupportedError: For a ``backend`` other than the namespace (a backend is named by
                its namespace here).
            UserError: For a name without a namespace, a pack whose handlers get no ``ctx``,
                or a primitive that exists and ``replace`` is false.
        """
        namespace, _, rest = name.partition(".")
        if not rest:
            raise UserError(f"a primitive's name is '<namespace>.<name>', got {name!r}")
        if backend not in (None, namespace):
            raise UnsupportedError(
                f"a primitive's backend is its namespace's here: register it with "
                f"repl.register_runtime_backend({namespace!r}, ...) and use backend={namespace!r}"
            )
        pack = self._kernel.packs.get(namespace)
        if pack is None:
            pack = PrimitivePack(namespace, pass_context=True)
            self.install_primitive_pack(pack)
        if not pack.pass_context:
            raise UserError(f"the pack under {namespace!r} calls its handlers without ctx")
        if pack.get(rest) is not None and not replace:
            raise UserError(f"primitive {name!r} is already registered")

        def register(func: F) -> F:
            pack.add(rest, func, contract=contract, timeout=timeout, description=description)
            self._kernel.invalidate()
            return func

        return register

    def get_primitive_contract(self, name: str) -> dict[str, Any]:
        """Primitive ``"<namespace>.<name>"`` as kernel code's ``runtime.list_primitives()``
        lists it: ``name``, ``contract``, ``description``, ``pack``, ``parameters``.

        Raises:
            UnknownPackError: For a name no installed primitive has (a ``KeyError``).
        """
        namespace, _, rest = name.partition(".")
        pack = self._kernel.packs.get(namespace)
        primitive = pack.get(rest) if pack is not None else None
        if pack is None or primitive is None:
            raise UnknownPackError(f"no primitive {name!r} is installed")
        return primitive_entry(pack, primitive)

    def list_installed_packs(self) -> list[str]:
        """The namespaces of the installed packs, sorted (SimpleLLMFunc's name)."""
        return sorted(self._kernel.packs)

    def list_primitives(self) -> list[str]:
        """The full names of the installed primitives (``"selfref.fork.spawn"``), sorted: what
        kernel code calls as ``runtime.<name>(...)``."""
        packs = self._kernel.packs.values()
        return sorted(f"{pack.namespace}.{p.name}" for pack in packs for p in pack.primitives)

    def pack_guidance(self) -> str:
        """The system-prompt text of ``execute_code`` (its ``prompt_injection_builder``): the
        installed packs, one line each with its description; ``""`` when none is installed.
        Read at every request, so a pack installed during a run is listed from the next call."""
        packs = sorted(self._kernel.packs.values(), key=lambda pack: pack.namespace)
        if not packs:
            return ""
        lines = [
            "Runtime primitives are host functions, not tool calls: call them in code you run "
            "with execute_code, as runtime.<namespace>.<name>(...). runtime.list_primitives() "
            "lists them with their contracts.",
            "Installed primitive packs:",
        ]
        for pack in packs:
            lines.append(
                f"- {pack.namespace}: {pack.description}"
                if pack.description
                else f"- {pack.namespace}"
            )
        return "\n".join(lines)

    def attach_self_reference(self, obj: Any, *, namespace: str = "selfref") -> None:
        """Attach a SelfReference-like object; kernel code reaches it as ``self_reference``.

        ``self_reference`` in the kernel is ``runtime.<namespace>``: attribute access and calls
        go to the primitives of the pack installed under ``namespace``. If ``obj`` has an
        ``as_primitive_pack()`` method, the pack it returns is installed. Survives ``reset()``.
        """
        self._self_reference = obj
        make_pack = getattr(obj, "as_primitive_pack", None)
        if callable(make_pack):
            pack = make_pack()
            if isinstance(pack, PrimitivePack):
                self.install_primitive_pack(pack)
                namespace = pack.namespace
        self._kernel.selfref_namespace = namespace
        self._kernel.invalidate()
