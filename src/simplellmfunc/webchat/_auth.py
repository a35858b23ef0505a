"""Access to a served app: a bearer token, unless the server listens on loopback only.

One check for the web chat page and ``simplellmfunc serve`` (and both at once, ``serve
--web``): :class:`BearerAuth` is an ASGI middleware that refuses a request without the token.
API calls carry it as ``Authorization: Bearer``; a page a browser opens from an address (only
the paths named in ``query_paths``) may carry it as ``?token=`` instead, and the page then
sends it in the header. The token is never logged.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, TypeAlias
from urllib.parse import parse_qs

if TYPE_CHECKING:  # no import of starlette until an app is made
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["BearerAuth", "is_loopback", "token_matches"]

Refusal: TypeAlias = "Callable[[int, str], Response]"
"""Makes the 401 response (status, message) in the app's error shape."""

REFUSED = "a valid bearer token is required"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(expected: str | None, header: str | None, query: str | None = None) -> bool:
    """Whether a request carries ``expected`` (``Authorization: Bearer``, or ``query``: the
    ``?token=`` of a page's address); always true without a token."""
    if expected is None:
        return True
    given = query
    if header is not None and header.lower().startswith("bearer "):
        given = header[7:].strip()
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())


class BearerAuth:
    """Refuses (401) requests without ``Authorization: Bearer <token>``.

    Args:
        app: The app behind it.
        token: The token.
        refuse: Makes the 401 response (the app's own error shape).
        public: Paths open to anyone (a health check, an agent card).
        public_prefixes: Path prefixes open to anyone (the page's static files).
        query_paths: Paths that may carry the token as ``?token=`` instead (a page opened
            from an address).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        refuse: Refusal,
        public: Collection[str] = (),
        public_prefixes: tuple[str, ...] = (),
        query_paths: Collection[str] = (),
    ) -> None:
        self.app = app
        self._token = token
        self._refuse = refuse
        self._public = frozenset(public)
        self._prefixes = public_prefixes
        self._query_paths = frozenset(query_paths)

    def _allowed(self, scope: Scope) -> bool:
        path = _route_path(scope)
        if path in self._public or path.startswith(self._prefixes):
            return True
        header = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1") or None
        query = None
        if path in self._query_paths:
            found = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
            query = found[0] if found else None
        return token_matches(self._token, header, query)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._allowed(scope):
            response = self._refuse(401, REFUSED)
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _route_path(scope: Scope) -> str:
    """The path inside the app (a mounted app's scope keeps the full path, and its mount point
    in ``root_path``)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        path = path[len(root) :]
    return path or "/"
