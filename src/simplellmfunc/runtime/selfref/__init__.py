"""SimpleLLMFunc's ``runtime.selfref`` package: :class:`~simplellmfunc.builtin.SelfReference`,
its memory handles, the name of its PyRepl backend (``repl.get_runtime_backend("selfref")``),
the ``_template_params`` keys, and ``context_ops`` (the compaction summary and experience
block as text)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..._compat import (
    FORK_TASK_PARAM,
    KEY_OVERRIDE_PARAM,
    TOOLKIT_OVERRIDE_PARAM,
    compat_getattr,
)
from ...exceptions import UnsupportedError

if TYPE_CHECKING:
    from ...builtin import SelfReference
    from ...builtin.pyrepl import PrimitivePack
    from ...builtin.selfref import InstanceHandle as SelfReferenceInstanceHandle
    from ...builtin.selfref import MemoryHandle as SelfReferenceMemoryHandle
    from ...builtin.selfref import MemoryMap as SelfReferenceMemoryProxy

__all__ = [
    "DEFAULT_SELF_REFERENCE_BACKEND_NAME",
    "SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM",
    "SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM",
    "SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM",
    "SelfReference",
    "SelfReferenceInstanceHandle",
    "SelfReferenceMemoryHandle",
    "SelfReferenceMemoryProxy",
    "build_self_reference_pack",
]

DEFAULT_SELF_REFERENCE_BACKEND_NAME = "selfref"
# A ``_template_params`` key: its value (a toolkit list) replaces the decorator's toolkit for
# this call (our own spelling is the ``_toolkit=`` keyword, which adds to it).
SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM = TOOLKIT_OVERRIDE_PARAM
# SimpleLLMFunc's keys for a per-call memory key and a fork's task. Here the memory key is the
# decorator's ``self_reference_key=`` (a call that passes this key is refused with that
# replacement named), and a fork's task is the argument of ``runtime.selfref.fork.spawn(task)``
# (the key is dropped from the template parameters).
SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM = KEY_OVERRIDE_PARAM
SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM = FORK_TASK_PARAM


def build_self_reference_pack(
    backend: SelfReference,
    *,
    backend_name: str = DEFAULT_SELF_REFERENCE_BACKEND_NAME,
    replace: bool = False,
) -> PrimitivePack:
    """The ``selfref`` primitive pack of ``backend`` (``backend.as_primitive_pack()``); install it
    with ``repl.install_pack(pack)``, or simply ``repl.attach_self_reference(backend)``.

    Raises:
        UnsupportedError: For a ``backend_name`` other than ``"selfref"`` (here the pack's
            namespace names its backend).
    """
    del replace  # installing decides: repl.install_pack(pack, replace=True)
    if backend_name != DEFAULT_SELF_REFERENCE_BACKEND_NAME:
        raise UnsupportedError(
            f"backend_name={backend_name!r}: the selfref pack's namespace names its backend; "
            "use repl.attach_self_reference(self_reference, namespace=...)"
        )
    pack: PrimitivePack = backend.as_primitive_pack()
    return pack


__getattr__: Any = compat_getattr(
    __name__,
    {
        "SelfReference": (".builtin", "SelfReference"),
        "SelfReferenceInstanceHandle": (".builtin.selfref", "InstanceHandle"),
        "SelfReferenceMemoryHandle": (".builtin.selfref", "MemoryHandle"),
        "SelfReferenceMemoryProxy": (".builtin.selfref", "MemoryMap"),
    },
    {
        "SELF_REFERENCE_PACK_GUIDANCE": "the selfref pack documents itself: "
        "runtime.list_primitive_specs() in the kernel",
        "register_self_reference_primitives": "PyRepl.attach_self_reference(self_reference)",
    },
)
