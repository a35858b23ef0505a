"""SimpleLLMFunc's ``runtime.selfref`` module: :class:`~simplellmfunc.builtin.SelfReference`
and the name of its PyRepl backend (``repl.get_runtime_backend("selfref")``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._compat import compat_getattr

if TYPE_CHECKING:
    from ..builtin import SelfReference

__all__ = ["DEFAULT_SELF_REFERENCE_BACKEND_NAME", "SelfReference"]

DEFAULT_SELF_REFERENCE_BACKEND_NAME = "selfref"

__getattr__ = compat_getattr(
    __name__,
    {"SelfReference": (".builtin", "SelfReference")},
    {
        "SELF_REFERENCE_TOOLKIT_OVERRIDE_TEMPLATE_PARAM": "for tools that change between calls "
        "put a simplellmfunc.tools.ToolProvider in the toolkit (its list_tools() is asked at "
        "every call); a fork's toolkit is its parent's, each PyRepl replaced by a fresh fork",
        "SELF_REFERENCE_KEY_OVERRIDE_TEMPLATE_PARAM": "pass self_reference_key= to @llm_chat, "
        "or key= to the runtime.selfref.context primitives",
        "SELF_REFERENCE_FORK_TASK_TEMPLATE_PARAM": "forks get their task from "
        "runtime.selfref.fork.spawn(task)",
        "build_self_reference_pack": "SelfReference.as_primitive_pack()",
        "register_self_reference_primitives": "PyRepl.attach_self_reference(self_reference)",
    },
)
