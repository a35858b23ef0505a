"""Kernel side: ``runtime``, the client of the host bridge (standard library only).

Kernel code calls ``runtime.<namespace>.<name>(...)``; the call travels as one JSON line over a
local socket to the host, which runs the primitive on its event loop and answers with one JSON
line. Calls are synchronous for the kernel code, may come from several threads at once (one
connection per call) and time out. Errors raised by the primitive come back typed: a
:class:`BridgeError` whose ``error_type`` names the host exception, also an instance of the
matching built-in exception class when there is one (``except KeyError`` works).
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
from typing import Any
from xml.sax.saxutils import escape

__all__ = ["BridgeError", "PrimitiveListing", "RemotePath", "Runtime"]

_MAX_LINE = 16 * 1024 * 1024
_BUILTIN_ERRORS: dict[str, type[Exception]] = {
    cls.__name__: cls
    for cls in (
        AttributeError,
        FileNotFoundError,
        IndexError,
        KeyError,
        LookupError,
        NotImplementedError,
        PermissionError,
        RuntimeError,
        TimeoutError,
        TypeError,
        ValueError,
    )
}
_ERROR_CLASSES: dict[str, type[BridgeError]] = {}


class BridgeError(Exception):
    """A call to the host failed; ``error_type`` names the host-side exception.

    This is :class:`simplellmfunc.exceptions.BridgeError` ("a call from kernel code back into the
    host failed") as kernel code sees it. It cannot be that class: the kernel never imports
    simplellmfunc (see ``_in_kernel/__init__``), and the exception never crosses back to the host
    as an object (the host reads it as the failed cell's error details). So the kernel has this
    standard-library stand-in under the same name, reached as ``runtime.BridgeError``.
    """

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}" if message else error_type)
        self.error_type = error_type
        self.message = message


def _error(error_type: str, message: str) -> BridgeError:
    base = _BUILTIN_ERRORS.get(error_type)
    if base is None:
        return BridgeError(error_type, message)
    cls = _ERROR_CLASSES.get(error_type)
    if cls is None:
        cls = type(f"Bridge{error_type}", (BridgeError, base), {})
        _ERROR_CLASSES[error_type] = cls
    return cls(error_type, message)


class PrimitiveListing(list):  # type: ignore[type-arg]
    """``[{"name", "contract", "description", "pack"}]``; ``"ns.name" in listing`` also tests
    the names (SimpleLLMFunc's ``runtime.list_primitives()`` is a list of names)."""

    def __contains__(self, item: object) -> bool:
        if isinstance(item, str):
            return any(entry.get("name") == item for entry in self)
        return super().__contains__(item)

    def names(self) -> list[str]:
        """The primitive names, in order."""
        return [str(entry.get("name")) for entry in self]


def _spec_xml(specs: list[dict[str, Any]]) -> str:
    lines = ["<primitive_specs>"]
    for spec in specs:
        lines.append("<primitive>")
        for field in ("name", "description", "contract", "pack"):
            lines.append(f"<{field}>{escape(str(spec.get(field, '')))}</{field}>")
        lines.append("</primitive>")
    lines.append("</primitive_specs>")
    return "\n".join(lines)


class Runtime:
    """Calls host primitives; ``runtime.<namespace>`` is a :class:`RemotePath`.

    ``runtime.BridgeError`` is the base class of the errors calls raise.
    """

    BridgeError = BridgeError

    def __init__(self) -> None:
        self._config: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._ids_lock = threading.Lock()

    def _configure(self, config: dict[str, Any] | None) -> None:
        self._config = config

    def call(self, target: str, *args: Any, **kwargs: Any) -> Any:
        """Call the host primitive ``target`` (``"namespace.name"``) and return its result.

        Raises:
            BridgeError: When the primitive fails, times out, or the host is unreachable.
            TypeError: When an argument cannot be sent as JSON.
        """
        config = self._config
        if config is None:
            raise _error("RuntimeError", "no host primitives are installed in this REPL")
        with self._ids_lock:
            call_id = next(self._ids)
        try:
            payload = json.dumps(
                {
                    "token": config["token"],
                    "id": call_id,
                    "target": target,
                    "args": list(args),
                    "kwargs": kwargs,
                }
            )
        except (TypeError, ValueError) as exc:
            raise TypeError(f"arguments of {target} must be JSON-serialisable: {exc}") from None
        reply = self._round_trip(config, payload.encode() + b"\n")
        if reply.get("ok"):
            return reply.get("result")
        error = reply.get("error") or {}
        raise _error(str(error.get("type", "BridgeError")), str(error.get("message", "")))

    def _round_trip(self, config: dict[str, Any], data: bytes) -> dict[str, Any]:
        timeout = float(config.get("timeout", 60.0))
        try:
            with _connect(config, timeout) as sock:
                sock.sendall(data)
                line = _read_line(sock)
        except TimeoutError:
            raise _error("TimeoutError", f"the host did not answer within {timeout:g} s") from None
        except OSError as exc:
            raise _error("ConnectionError", f"cannot reach the host: {exc}") from None
        try:
            reply = json.loads(line)
        except ValueError:
            raise _error("BridgeError", "malformed reply from the host") from None
        return reply if isinstance(reply, dict) else {}

    def list_primitives(
        self,
        namespace: str | None = None,
        *,
        prefix: str | None = None,
        contains: str | None = None,
    ) -> PrimitiveListing:
        """Return ``[{"name", "contract", "description", "pack"}]`` for the installed
        primitives (of ``namespace``; whose name starts with ``prefix`` / contains
        ``contains``)."""
        if self._config is None:
            return PrimitiveListing()
        listed = self.call("__list__", namespace)
        return PrimitiveListing(
            entry
            for entry in (listed if isinstance(listed, list) else [])
            if str(entry.get("name", "")).startswith(prefix or "")
            and (contains or "") in str(entry.get("name", ""))
        )

    def list_primitive_specs(
        self,
        names: list[str] | None = None,
        prefix: str | None = None,
        contains: str | None = None,
        format: str = "xml",
    ) -> Any:
        """The primitives' specs (``name``, ``description``, ``contract``, ``pack``) as XML, or
        a list of dicts with ``format="dict"``; ``names`` picks exact names."""
        specs = [
            dict(entry)
            for entry in self.list_primitives(prefix=prefix, contains=contains)
            if names is None or entry.get("name") in names
        ]
        return specs if format.strip().lower() in ("dict", "json") else _spec_xml(specs)

    def list_backends(self) -> list[str]:
        """The namespaces of the installed packs that have a backend object (``selfref``...)."""
        if self._config is None:
            return []
        listed = self.call("__backends__")
        return [str(name) for name in listed] if isinstance(listed, list) else []

    def help(self, namespace: str | None = None) -> None:
        """Print every installed primitive with its contract."""
        primitives = self.list_primitives(namespace)
        if not primitives:
            print("No host primitives are installed.")
        for item in primitives:
            print(f"runtime.{item['name']}: {item.get('contract', '')}")

    def __getattr__(self, name: str) -> RemotePath:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemotePath(self, (name,), ())

    def __dir__(self) -> list[str]:
        names = {str(p["name"]).split(".", 1)[0] for p in self.list_primitives()}
        return sorted(
            names | {"call", "help", "list_backends", "list_primitive_specs", "list_primitives"}
        )

    def __repr__(self) -> str:
        return "<runtime: host primitives; runtime.help() lists them>"


class RemotePath:
    """A dotted path to host primitives; calling it calls the primitive.

    ``path["key"]`` adds a ``[]`` segment and passes ``"key"`` as the first argument:
    ``self_reference.memory["main"].count()`` calls ``selfref.memory[].count("main")``.
    """

    def __init__(self, runtime: Runtime, segments: tuple[str, ...], bound: tuple[Any, ...]) -> None:
        self._runtime = runtime
        self._segments = segments
        self._bound = bound

    def _target(self) -> str:
        return ".".join(self._segments).replace(".[]", "[]")

    def __getattr__(self, name: str) -> RemotePath:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemotePath(self._runtime, (*self._segments, name), self._bound)

    def __getitem__(self, key: Any) -> RemotePath:
        return RemotePath(self._runtime, (*self._segments, "[]"), (*self._bound, key))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._runtime.call(self._target(), *self._bound, *args, **kwargs)

    def __dir__(self) -> list[str]:
        prefix = self._target() + "."
        names = set()
        for item in self._runtime.list_primitives(self._segments[0]):
            name = str(item["name"])
            if name.startswith(prefix):
                names.add(name[len(prefix) :].split(".", 1)[0].split("[", 1)[0])
        return sorted(names)

    def __repr__(self) -> str:
        return f"<host primitives at {self._target()}; runtime.help() lists them>"


def _connect(config: dict[str, Any], timeout: float) -> socket.socket:
    if config["family"] == "unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        address: Any = config["address"]
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        address = (config["host"], int(config["port"]))
    sock.settimeout(timeout)
    try:
        sock.connect(address)
    except BaseException:
        sock.close()
        raise
    return sock


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or size > _MAX_LINE:
            break
    return b"".join(chunks)
