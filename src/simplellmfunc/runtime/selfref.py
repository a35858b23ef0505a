"""SimpleLLMFunc's ``runtime.selfref`` module: :class:`~simplellmfunc.builtin.SelfReference`
and the name of its PyRepl backend (``repl.get_runtime_backend("selfref")``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._compat import TOOLKIT_OVERRIDE_PARAM, compat_getattr

if TYPE_CHECKING:
    from ..builtin import SelfReference

__all__ = [
    "DEFAULT_SELF_REFERENCE_BACKEND_NAME",
    "SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM",
    "SelfReference",
]

DEFAULT_SELF_REFERENCE_BACKEND_NAME = "selfref"
# A ``_template_params`` key: its value (a toolkit list) replaces the decorator's toolkit for
# this call (our own spelling is the ``_toolkit=`` keyword, which adds to it).
SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM = TOOLKIT_OVERRIDE_PARAM

__getattr__ = compat_getattr(
    __name__,
    {"SelfReference": (".builtin", "SelfReference")},
    {
        "SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM": "pass self_reference_key= to @llm_chat, "
        "or key= to the runtime.selfref.context primitives",
        "SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM": "forks get their task from "
        "runtime.selfref.fork.spawn(task)",
        "build_self_reference_pack": "SelfReference.as_primitive_pack()",
        "register_self_reference_primitives": "PyRepl.attach_self_reference(self_reference)",
    },
)
