"""The edge of every app we serve: one ASGI middleware that checks each request before any
handler runs, and the JSON body reader the handlers use.

In order, :class:`EdgeGuard` refuses:

1. a ``Host`` header not in the policy's allowed hosts: 421 (defeats DNS rebinding: a page
   whose name resolves to 127.0.0.1 still sends its own name);
2. a state-changing request (anything but GET / HEAD / OPTIONS) from another origin: an
   ``Origin`` that is neither this server's own nor an allowed one, or ``Sec-Fetch-Site:
   cross-site`` / ``same-site``: 403;
3. a request without a valid bearer token when the server has tokens: 401 (public paths
   excepted; a page's address may carry it as ``?token=``);
4. a state-changing body that is not ``application/json`` (a cross-site form or
   ``text/plain`` post can never run a turn): 415;
5. a body over ``max_body_bytes`` (413, read incrementally: a lying ``Content-Length`` or a
   chunked upload never makes it grow past the limit), one slower than ``body_timeout`` (408),
   one that is not UTF-8 JSON (``NaN`` and ``Infinity`` included), or is nested deeper than
   ``max_json_depth``: 400.

Lone surrogates (``"\\ud800"``) in the JSON are replaced with U+FFFD before the app sees the
body, so every history stays encodable. The app gets the principal as ``scope["user"]``
(``request.user``) and the checked body, replayed. Refusals are JSON in the shape of the
door (OpenAI's, the web page's, JSON-RPC's), chosen by path prefix.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._unicode import has_surrogate_escape, replace_surrogates_in
from ..exceptions import RequestRefusedError
from ._principals import ANONYMOUS, LOOPBACK_NAMES, Principal, Principals, allowed_hosts_for

if TYPE_CHECKING:
    from ..runtime.config import AgentConfig

__all__ = [
    "EdgeGuard",
    "EdgePolicy",
    "ErrorShape",
    "jsonrpc_error",
    "parse_json_body",
    "principal_of",
    "read_json",
]

logger = logging.getLogger("simplellmfunc.serve")

ErrorShape = Callable[[int, str, str], Response]
"""Makes a refusal in a door's error shape: ``(status, code, message) -> Response``."""

_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class EdgePolicy:
    """What every request must pass, and the connection limits of the server (uvicorn).

    Attributes:
        allowed_hosts: ``Host`` names answered (any port); ``{"*"}``: any. Default: the
            loopback names (see :func:`allowed_hosts_for` for a server's bind address).
        allowed_origins: Origins (``scheme://host[:port]``) besides the server's own that may
            send state-changing requests (a separate front end).
        max_body_bytes: Largest request body.
        max_json_depth: Deepest nesting of arrays and objects in a JSON body.
        body_timeout: Seconds a request body may take to arrive.
        header_timeout: Seconds a connection may take to send a request's head, from its
            opening or from the end of the previous response (idle keep-alive included).
        keep_alive_timeout: Seconds an idle keep-alive connection is kept.
        max_connections: Connections (and running requests) at once; beyond: 503.
        max_header_bytes: Largest request head.
    """

    allowed_hosts: frozenset[str] = LOOPBACK_NAMES
    allowed_origins: frozenset[str] = frozenset()
    max_body_bytes: int = 8 * 1024 * 1024
    max_json_depth: int = 64
    body_timeout: float = 30.0
    header_timeout: float = 10.0
    keep_alive_timeout: float = 5.0
    max_connections: int = 256
    max_header_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        hosts = frozenset(h.strip("[]").lower() for h in self.allowed_hosts)
        object.__setattr__(self, "allowed_hosts", hosts)
        origins = frozenset(o.rstrip("/").lower() for o in self.allowed_origins)
        object.__setattr__(self, "allowed_origins", origins)
        if self.max_body_bytes < 1 or self.max_json_depth < 1:
            raise ValueError("max_body_bytes and max_json_depth must be at least 1")

    @classmethod
    def for_server(
        cls, config: AgentConfig, host: str, allowed_hosts: Sequence[str] = ()
    ) -> EdgePolicy:
        """The policy of a config's ``serve:`` section for a server bound to ``host``
        (``allowed_hosts``: more names, from the command line).

        Raises:
            UserError: For a wildcard bind address without allowed hosts.
        """
        section = config.serve
        return cls(
            allowed_hosts=allowed_hosts_for(host, [*section.allowed_hosts, *allowed_hosts]),
            allowed_origins=frozenset(section.allowed_origins),
            max_body_bytes=section.max_body_bytes,
            body_timeout=section.body_timeout,
            header_timeout=section.header_timeout,
            max_connections=section.max_connections,
        )

    def host_allowed(self, host: str) -> bool:
        """Whether a ``Host`` header (``name[:port]``) names this server."""
        if "*" in self.allowed_hosts:
            return True
        name = _host_name(host)
        return name is not None and name in self.allowed_hosts


def _host_name(host: str) -> str | None:
    """The name of a ``Host`` header without its port (``None``: not a valid header)."""
    host = host.strip().lower()
    if not host:
        return None
    if host.startswith("["):
        end = host.find("]")
        return host[1:end] if end > 0 else None
    name, _, port = host.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".") or None


# -- JSON bodies ------------------------------------------------------------------------------


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays / objects deeper than ``limit`` (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Collection[Any] = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def parse_json_body(body: bytes, max_depth: int = 64) -> tuple[Any, bytes]:
    """The JSON value of a request body, and the body to hand on (re-encoded when a lone
    surrogate was replaced with U+FFFD; else ``body`` itself).

    Raises:
        RequestRefusedError: 400 for a body that is not UTF-8 JSON or nests deeper than
            ``max_depth``.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestRefusedError("the body is not UTF-8", code="invalid_json") from None
    # A nesting beyond the brackets' count is impossible: most bodies skip the walk.
    brackets = body.count(b"[") + body.count(b"{")
    try:
        value = json.loads(text, parse_constant=_not_json)
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError as exc:
        raise RequestRefusedError(
            f"the body is not valid JSON: {exc}", code="invalid_json"
        ) from None
    if brackets > max_depth and _depth_exceeds(value, max_depth):
        raise _too_deep(max_depth)
    if has_surrogate_escape(text):
        cleaned = replace_surrogates_in(value)
        if cleaned != value:
            value = cleaned
            body = json.dumps(value, ensure_ascii=False).encode("utf-8")
    return value, body


def _not_json(constant: str) -> Any:
    """``NaN`` / ``Infinity`` are Python's, not JSON's: stored, they would break every later
    JSON answer of the session."""
    raise ValueError(f"{constant} is not JSON")


def _too_deep(limit: int) -> RequestRefusedError:
    return RequestRefusedError(
        f"the JSON body nests deeper than {limit} levels", code="json_too_deep"
    )


async def read_json(request: Request, max_depth: int | None = None) -> Any:
    """The JSON body of ``request``, checked as :class:`EdgeGuard` checks it (behind the
    guard the body was checked already; this also guards apps built without it).

    Raises:
        RequestRefusedError: For a body that is not JSON, or nests too deeply.
    """
    if max_depth is None:
        policy = request.scope.get("simplellmfunc.edge")
        max_depth = policy.max_json_depth if isinstance(policy, EdgePolicy) else 64
    value, _ = parse_json_body(await request.body(), max_depth)
    return value


def principal_of(request: Request) -> Principal:
    """Who ``request`` speaks for (:data:`ANONYMOUS` without a guard or without auth)."""
    user = request.scope.get("user")
    return user if isinstance(user, Principal) else ANONYMOUS


# -- error shapes -----------------------------------------------------------------------------


def _plain_error(status: int, code: str, message: str) -> Response:
    return JSONResponse({"error": {"message": message, "type": code}}, status_code=status)


def jsonrpc_error(status: int, code: str, message: str) -> Response:
    """A refusal as JSON-RPC: an unreadable body is a parse error (-32700, HTTP 200 as the
    A2A SDK answers it); anything else keeps its HTTP status, as an invalid request."""
    if status == 400:
        error = {"code": -32700, "message": f"Parse error: {message}"}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})
    error = {"code": -32600, "message": message, "data": {"reason": code}}
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status_code=status)


# -- the middleware ---------------------------------------------------------------------------


class EdgeGuard:
    """The checks of the module docstring, in front of ``app``.

    Args:
        app: The app behind it.
        policy: Hosts, origins and limits.
        principals: The tokens accepted (default: none needed).
        shapes: ``(path prefix, shape)`` pairs: refusals on paths under a prefix take its
            error shape (the first match); others the default.
        default_shape: The error shape of other paths.
        public: Paths anyone may GET (a health check, an agent card).
        public_prefixes: Path prefixes anyone may GET (a page's static files).
        query_paths: Paths that may carry the token as ``?token=`` (a page's address).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        policy: EdgePolicy | None = None,
        principals: Principals | None = None,
        shapes: Sequence[tuple[str, ErrorShape]] = (),
        default_shape: ErrorShape = _plain_error,
        public: Collection[str] = (),
        public_prefixes: tuple[str, ...] = (),
        query_paths: Collection[str] = (),
    ) -> None:
        self.app = app
        self.policy = policy or EdgePolicy()
        self.principals = principals or Principals.open()
        self._shapes = tuple(shapes)
        self._default = default_shape
        self._public = frozenset(public)
        self._prefixes = public_prefixes
        self._query_paths = frozenset(query_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = _route_path(scope)
        try:
            principal = self._admit(scope, path)
            receive = await self._body(scope, receive)
        except RequestRefusedError as exc:
            if exc.status >= 500 or exc.status in (408, 413):
                logger.info("refused %s %s: %s", scope["method"], path, exc)
            response = self._shape(path)(exc.status, exc.code, str(exc))
            if exc.status == 401:
                response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        scope["user"] = principal
        scope["simplellmfunc.edge"] = self.policy
        await self.app(scope, receive, send)

    def _shape(self, path: str) -> ErrorShape:
        for prefix, shape in self._shapes:
            if path.startswith(prefix):
                return shape
        return self._default

    def _admit(self, scope: Scope, path: str) -> Principal:
        headers = _headers(scope)
        host = headers.get("host", "")
        if not self.policy.host_allowed(host):
            raise RequestRefusedError(
                f"this server does not answer to the host {host[:100]!r}",
                status=421,
                code="host_not_allowed",
            )
        method = scope["method"]
        if method not in _SAFE:
            self._check_origin(headers, host, scope.get("scheme", "http"))
        if method in ("GET", "HEAD") and (path in self._public or path.startswith(self._prefixes)):
            return ANONYMOUS
        given = None
        header = headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            given = header[7:].strip()
        elif path in self._query_paths:
            found = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            given = found[0] if found else None
        principal = self.principals.authenticate(given)
        if principal is None:
            raise RequestRefusedError(
                "a valid bearer token is required", status=401, code="unauthorized"
            )
        return principal

    def _check_origin(self, headers: dict[str, str], host: str, scheme: str) -> None:
        origin = headers.get("origin")
        if origin is not None:
            origin = origin.strip().rstrip("/").lower()
            own = f"{scheme}://{host.strip().lower()}"
            if origin == own or origin in self.policy.allowed_origins:
                return
            if _default_port(origin) == _default_port(own):
                return
            raise RequestRefusedError(
                f"cross-origin requests from {origin[:100]!r} are refused",
                status=403,
                code="cross_origin",
            )
        site = headers.get("sec-fetch-site")
        if site in ("cross-site", "same-site"):
            raise RequestRefusedError(
                "cross-site requests are refused", status=403, code="cross_origin"
            )

    async def _body(self, scope: Scope, receive: Receive) -> Receive:
        """Read and check a state-changing request's body; a ``receive`` that replays it."""
        if scope["method"] in _SAFE:
            return receive
        headers = _headers(scope)
        length = headers.get("content-length")
        chunked = "transfer-encoding" in headers
        if not chunked and (length is None or length.strip() == "0"):
            return receive  # no body (an abort button's POST): nothing to parse
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json" and not media.endswith("+json"):
            raise RequestRefusedError(
                f"bodies must be application/json, not {media[:60] or 'untyped'!r}",
                status=415,
                code="unsupported_media_type",
            )
        limit = self.policy.max_body_bytes
        if length is not None and (not length.strip().isdigit() or int(length) > limit):
            raise _too_large(limit)
        body = bytearray()
        try:
            with anyio.fail_after(self.policy.body_timeout):
                more = True
                while more:
                    message = await receive()
                    if message["type"] != "http.request":
                        raise RequestRefusedError(
                            "the client left", status=400, code="disconnected"
                        )
                    body += message.get("body", b"")
                    if len(body) > limit:
                        raise _too_large(limit)
                    more = message.get("more_body", False)
        except TimeoutError:
            raise RequestRefusedError(
                f"the body did not arrive within {self.policy.body_timeout:g} s",
                status=408,
                code="body_timeout",
            ) from None
        _, checked = parse_json_body(bytes(body), self.policy.max_json_depth)
        return _replay(checked, receive)


def _too_large(limit: int) -> RequestRefusedError:
    return RequestRefusedError(
        f"bodies are limited to {limit} bytes", status=413, code="body_too_large"
    )


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the client sends (its disconnect)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}


def _default_port(origin: str) -> str:
    """``scheme://host:port`` with the scheme's default port made explicit."""
    parts = urlsplit(origin)
    try:
        port = parts.port
    except ValueError:
        return ""
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return f"{parts.scheme}://{parts.hostname}:{port or default}"


def _route_path(scope: Scope) -> str:
    """The path inside the app (a mounted app's scope keeps the full path, and its mount point
    in ``root_path``)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        path = path[len(root) :]
    return path or "/"
