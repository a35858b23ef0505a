"""Which PyRepl cells ask a person first: :func:`code_touches_system`."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

__all__ = ["code_touches_system"]

_MODULES = frozenset({"subprocess", "shutil", "socket", "ctypes", "multiprocessing", "pty"})
_CALLS = frozenset(
    {
        "system", "popen", "spawnl", "spawnv", "execv", "execvp", "fork", "kill",
        "remove", "unlink", "rmdir", "removedirs", "rmtree", "rename", "replace", "makedirs",
        "mkdir", "write_text", "write_bytes", "touch", "chmod", "chown", "symlink", "truncate",
        "copy", "copyfile", "copytree", "move",
    }
)  # fmt: skip
_WRITE_MODES = frozenset("wax+")


def code_touches_system(arguments: Mapping[str, Any]) -> str | None:
    """Why an ``execute_code`` call should wait for approval, or ``None`` to run it.

    A cell asks first when it imports a process, socket or file-tree module (``subprocess``,
    ``shutil`` …), calls a writing or process function (``os.remove``, ``Path.write_text``,
    ``os.system`` …), opens a file for writing, or uses an IPython shell escape (``!ls``,
    ``%%bash``). A cell that does not parse asks too. It reads the code, so it is a guard
    against mistakes, not a sandbox: code can always hide what it does (use the kernel's
    sandbox for that). Use it as ``PyRepl(requires_approval=code_touches_system)``.
    """
    code = arguments.get("code")
    if not isinstance(code, str):
        return None
    for line in code.splitlines():
        if line.lstrip().startswith(("!", "%")):
            return "the cell runs a shell or magic command"
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "the cell does not parse, so what it does cannot be checked"
    for node in ast.walk(tree):
        reason = _risk(node)
        if reason:
            return reason
    return None


def _risk(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
        for name in names:
            root = (name or "").split(".")[0]
            if root in _MODULES:
                return f"the cell imports {root}"
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _CALLS:
        return f"the cell calls {name}()"
    if name == "open" and _writes(node):
        return "the cell opens a file for writing"
    return None


def _writes(call: ast.Call) -> bool:
    mode: ast.expr | None = call.args[1] if len(call.args) > 1 else None
    for keyword in call.keywords:
        if keyword.arg == "mode":
            mode = keyword.value
    if mode is None:
        return False
    if not isinstance(mode, ast.Constant) or not isinstance(mode.value, str):
        return True  # a computed mode: ask
    return bool(_WRITE_MODES & set(mode.value))
