"""The host-primitives face of a :class:`~._repl.PyRepl`: primitive packs that kernel code
calls as ``runtime.<namespace>.<name>(...)``, their backend objects, and the attached
SelfReference (``self_reference`` in the kernel)."""

from __future__ import annotations

from typing import Any

from ...exceptions import ArgumentValueError, UnknownPackError, UnsupportedError, UserError
from ._managed import ManagedKernel
from ._pack import PrimitivePack, default_backend, pack_backends

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
