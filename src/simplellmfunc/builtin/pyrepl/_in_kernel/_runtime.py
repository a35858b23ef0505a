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


def _param(name: str, kind: str, type_: str, default: str | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {"name": name, "kind": kind, "type": type_, "required": default is None}
    if default is not None:
        item["default"] = default
    return item


_OPTIONAL_STR = "str | None"
_BUILTIN_PACK = "the runtime's own primitives: how to find and read the host primitives"
_LISTED = "list of {name, contract, description, pack, parameters} dicts"
_BUILTINS: tuple[dict[str, Any], ...] = (
    {
        "name": "runtime.list_primitives",
        "contract": "list_primitives(namespace=None, *, prefix=None, contains=None) -> list",
        "description": "List the callable primitives (of one namespace; whose name starts "
        "with prefix / contains a text).",
        "parameters": [
            _param("namespace", "positional_or_keyword", _OPTIONAL_STR, "None"),
            _param("prefix", "keyword_only", _OPTIONAL_STR, "None"),
            _param("contains", "keyword_only", _OPTIONAL_STR, "None"),
        ],
        "input_type": "optional filters",
        "output_type": _LISTED + "; `'ns.name' in listing` tests a name",
        "output_parsing": "Iterate the list and read item['name'] and item['contract'].",
        "best_practices": [
            "Call it once to see what is installed, then read one spec with "
            "runtime.get_primitive_spec(name) before calling an unfamiliar primitive.",
        ],
    },
    {
        "name": "runtime.list_primitive_specs",
        "contract": "list_primitive_specs(names=None, prefix=None, contains=None, "
        "format='xml') -> str | list",
        "description": "Structured specs of the primitives (name, contract, description, "
        "parameters), as XML or, with format='dict', as a list of dicts.",
        "parameters": [
            _param("names", "positional_or_keyword", "list[str] | None", "None"),
            _param("prefix", "positional_or_keyword", _OPTIONAL_STR, "None"),
            _param("contains", "positional_or_keyword", _OPTIONAL_STR, "None"),
            _param("format", "positional_or_keyword", "str", "'xml'"),
        ],
        "input_type": "optional exact names or filters, and the format",
        "output_type": "XML <primitive_specs> text, or (format='dict') a " + _LISTED,
        "output_parsing": "With format='dict', iterate the list of dicts and read the "
        "'parameters' of the primitive you need.",
        "best_practices": ["Ask only for the names you need (names=[...] or prefix=...)."],
    },
    {
        "name": "runtime.get_primitive_spec",
        "contract": "get_primitive_spec(name, format='xml') -> str | dict",
        "description": "The structured spec of one primitive, by its exact name.",
        "parameters": [
            _param("name", "positional_or_keyword", "str"),
            _param("format", "positional_or_keyword", "str", "'xml'"),
        ],
        "input_type": "the primitive's exact name ('namespace.name')",
        "output_type": "XML <primitive_spec> text, or (format='dict') one spec dict",
        "output_parsing": "Read 'parameters' (name, kind, type, required) before calling it.",
        "best_practices": ["Use the exact names runtime.list_primitives() returns."],
    },
    {
        "name": "runtime.list_backends",
        "contract": "list_backends() -> list[str]",
        "description": "The namespaces of the installed packs that have a backend object.",
        "parameters": [],
        "input_type": "nothing",
        "output_type": "list of namespace names",
        "output_parsing": "Each name is reachable as runtime.<name>.",
        "best_practices": [],
    },
)
_FIELDS = ("name", "description", "contract", "pack", "input_type", "output_type")


def _requirements(spec: dict[str, Any]) -> str:
    parts = []
    for item in spec.get("parameters") or []:
        need = "required" if item.get("required") else f"optional, default {item.get('default')}"
        parts.append(f"{item.get('name')}({item.get('type')}, {need})")
    return "Parameter requirements: " + (", ".join(parts) or "no arguments.")


def _one_xml(spec: dict[str, Any], tag: str) -> list[str]:
    lines = [f"<{tag}>"]
    for field in _FIELDS:
        if field in spec:
            lines.append(f"<{field}>{escape(str(spec[field]))}</{field}>")
    params = spec.get("parameters") or []
    if params:
        lines.append("<parameters>")
        for item in params:
            need = "required" if item.get("required") else f"default {item.get('default')}"
            text = f"{item.get('name')} ({item.get('kind')}, {item.get('type')}, {need})"
            lines.append(f"<parameter>{escape(text)}</parameter>")
        lines.append("</parameters>")
    lines.append(f"</{tag}>")
    return lines


def _spec_xml(specs: list[dict[str, Any]]) -> str:
    lines = ["<primitive_specs>"]
    for spec in specs:
        lines.extend(_one_xml(spec, "primitive"))
    lines.append("</primitive_specs>")
    return "\n".join(lines)


def _wants_dict(format: str) -> bool:
    if not isinstance(format, str) or format.strip().lower() not in ("dict", "json", "xml"):
        raise TypeError(
            f"format must be 'xml' or 'dict', got {format!r}. "
            "Parameter requirements: format(str, optional, default 'xml')"
        )
    return format.strip().lower() != "xml"


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
        """Return ``[{"name", "contract", "description", "pack", "parameters"}]`` for the
        installed primitives and the ``runtime.*`` ones (of ``namespace``; whose name starts
        with ``prefix`` / contains ``contains``)."""
        listed: Any = []
        if self._config is not None and namespace != "runtime":
            listed = self.call("__list__", namespace)
        entries = list(listed if isinstance(listed, list) else [])
        if namespace in (None, "runtime"):
            entries.extend(
                {**spec, "pack": _BUILTIN_PACK, "parameters": list(spec["parameters"])}
                for spec in _BUILTINS
            )
        return PrimitiveListing(
            entry
            for entry in entries
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
        """The primitives' specs (``name``, ``description``, ``contract``, ``pack``,
        ``parameters``...) as XML, or a list of dicts with ``format="dict"``; ``names`` picks
        exact names."""
        as_dict = _wants_dict(format)
        if isinstance(names, str):
            names = [names]
        specs = [
            dict(entry)
            for entry in self.list_primitives(prefix=prefix, contains=contains)
            if names is None or entry.get("name") in names
        ]
        return specs if as_dict else _spec_xml(specs)

    def get_primitive_spec(self, name: str | None = None, format: str = "xml") -> Any:
        """The spec of the primitive called ``name`` (``"namespace.name"``): XML, or a dict
        with ``format="dict"``.

        Raises:
            TypeError: Without a name (the message gives the parameter requirements).
            KeyError: For a name no primitive has.
        """
        as_dict = _wants_dict(format)
        if not isinstance(name, str) or not name:
            spec = next(s for s in _BUILTINS if s["name"] == "runtime.get_primitive_spec")
            raise TypeError(
                f"runtime.get_primitive_spec() needs the primitive's name, got {name!r}. "
                + _requirements(spec)
            )
        wanted = name.removeprefix("runtime.") if name.count(".") > 1 else name
        for entry in self.list_primitives():
            if entry.get("name") in (name, wanted):
                return dict(entry) if as_dict else "\n".join(_one_xml(entry, "primitive_spec"))
        raise KeyError(f"no primitive {name!r}; runtime.list_primitives() lists them")

    def list_backends(self) -> list[str]:
        """The namespaces of the installed packs that have a backend object (``selfref``...)."""
        if self._config is None:
            return []
        listed = self.call("__backends__")
        return [str(name) for name in listed] if isinstance(listed, list) else []

    def help(self, namespace: str | None = None) -> None:
        """Print every installed primitive with its contract."""
        primitives = self.list_primitives(namespace)
        if not any(not str(p.get("name")).startswith("runtime.") for p in primitives):
            print("No host primitives are installed.")
        for item in primitives:
            name = str(item.get("name"))
            shown = name if name.startswith("runtime.") else f"runtime.{name}"
            print(f"{shown}: {item.get('contract', '')}")

    def __getattr__(self, name: str) -> RemotePath:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemotePath(self, (name,), ())

    def __dir__(self) -> list[str]:
        names = {str(p["name"]).split(".", 1)[0] for p in self.list_primitives()} - {"runtime"}
        builtins = {str(s["name"]).split(".", 1)[1] for s in _BUILTINS}
        return sorted(names | builtins | {"call", "help"})

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
    except BaseException:  # boundary: cleanup, re-raised: the socket is closed
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
