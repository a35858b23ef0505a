"""The sandboxed worker: runs one Python tool call inside a sandbox (``python -m`` this module).

Reads one JSON request on stdin (``module``, ``qualname``, ``main_file``, ``arguments``), imports
the tool, validates the arguments with its schema, calls it (awaiting coroutines) and writes one
JSON reply on the stdout it started with (what the tool prints goes to stderr)::

    {"ok": true, "result": ...}
    {"ok": false, "error": {"type", "message", "builtin", "limit", "violation"}}

``limit`` names the policy limit an error comes from (``MemoryError``: ``"memory"``; ``EAGAIN``
from fork: ``"processes"``; ``EMFILE``: ``"open_files"``; ``EFBIG``: ``"file_size"``);
``violation`` is set for a refused path (``EACCES``, ``EROFS``, ``EPERM``).
"""

from __future__ import annotations

import asyncio
import builtins
import errno
import importlib
import importlib.util
import inspect
import json
import os
import sys
from typing import Any

__all__ = ["main"]

_LIMIT_ERRNO = {errno.EAGAIN: "processes", errno.EMFILE: "open_files", errno.EFBIG: "file_size"}
_VIOLATION_ERRNO = {errno.EACCES, errno.EROFS, errno.EPERM}


def _load(request: dict[str, Any]) -> Any:
    module_name = request["module"]
    if module_name == "__main__":
        # The host's script: load it under another name so its `if __name__ == "__main__"`
        # block does not run again.
        spec = importlib.util.spec_from_file_location("__sandboxed_main__", request["main_file"])
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {request['main_file']!r}")
        module = importlib.util.module_from_spec(spec)
        sys.modules["__sandboxed_main__"] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    target: Any = module
    for part in request["qualname"].split("."):
        target = getattr(target, part)
    return target


async def _await(value: Any) -> Any:
    return await value


def _call(target: Any, arguments: dict[str, Any]) -> Any:
    schema = getattr(target, "schema", None)
    func = getattr(target, "func", target)
    kwargs = schema.validate(arguments) if schema is not None else arguments
    result = func(**kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    return result


def describe(exc: BaseException) -> dict[str, Any]:
    """The JSON description of a failure (see the module docstring)."""
    code = getattr(exc, "errno", None)
    limit = "memory" if isinstance(exc, MemoryError) else _LIMIT_ERRNO.get(code or -1)
    return {
        "type": type(exc).__name__,
        "message": str(exc),
        "builtin": getattr(builtins, type(exc).__name__, None) is type(exc),
        "limit": limit,
        "violation": limit is None and code in _VIOLATION_ERRNO,
    }


def main() -> None:
    """Serve one request from stdin."""
    request = json.loads(sys.stdin.buffer.read())
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # the tool's prints go to stderr, never into the reply
    try:
        from pydantic_core import to_jsonable_python

        result = _call(_load(request), dict(request.get("arguments") or {}))
        reply: dict[str, Any] = {"ok": True, "result": to_jsonable_python(result)}
    except BaseException as exc:  # boundary: every failure goes back to the host, typed
        reply = {"ok": False, "error": describe(exc)}
    try:
        data = json.dumps(reply)
    except (TypeError, ValueError) as exc:
        data = json.dumps({"ok": False, "error": describe(TypeError(f"result: {exc}"))})
    with os.fdopen(reply_fd, "w", encoding="utf-8") as out:
        out.write(data)


if __name__ == "__main__":
    main()
