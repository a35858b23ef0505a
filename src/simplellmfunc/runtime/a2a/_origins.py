"""Where an A2A tool's requests may go, and which of them carry its credentials.

A remote agent's card names the endpoints to call, and a card is the remote's word, not ours.
So that a card cannot steer our token or our requests somewhere else:

* **Credentials go to trusted origins only.** The token (and every header the user gave) is
  sent to the card's own origin (scheme, host and port of the URL the tool was given) and to
  the origins of an explicit allowlist, to nothing else: a card served by A that names
  ``http://B/rpc`` gets its calls to B sent bare. :class:`OriginAuth` decides per request, so it
  holds for every request the SDK makes.
* **No redirect is followed** (``follow_redirects=False`` on the client): a redirect is an
  error, never a second request carrying the token.
* **A card cannot point us inward:** an endpoint on a private, loopback, link-local or otherwise
  non-public address, named by a card that is not itself on such an address, is refused
  (:func:`refused_target`), so a remote card cannot make us probe the local network. Host names
  are resolved for the check; the connection resolves them again (a DNS answer that changes in
  between is not covered).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Generator, Iterable, Mapping
from urllib.parse import urlsplit

import anyio
import httpx

__all__ = ["OriginAuth", "origin_of", "refused_target"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """``scheme://host:port`` of ``url`` (the default port spelled out, host lowercased).

    Raises:
        ValueError: If ``url`` is not an absolute http(s) URL.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    port = parts.port or _DEFAULT_PORTS[scheme]
    host = parts.hostname.lower()
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


class OriginAuth(httpx.Auth):
    """Adds ``headers`` (the bearer token ...) to requests for the ``origins`` only."""

    def __init__(self, headers: Mapping[str, str], origins: Iterable[str]) -> None:
        self._headers = dict(headers)
        self._origins = frozenset(origins)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self._headers and origin_of(str(request.url)) in self._origins:
            request.headers.update(self._headers)
        yield request


def _inward(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not ip.is_global or ip.is_multicast


async def _is_inward(host: str) -> bool:
    """Whether ``host`` is, or resolves to, an address that is not public."""
    try:
        return _inward(host)
    except ValueError:
        pass  # a name, not an address
    try:
        infos = await anyio.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False  # it cannot be reached at all: the call fails as unreachable
    return any(_inward(str(info[4][0])) for info in infos)


async def refused_target(card_url: str, target: str) -> str | None:
    """Why ``target`` (an endpoint a card names) must not be called, or ``None``.

    A target on the card's own origin is fine; another one on a non-public address is refused
    unless the card itself is on a non-public address (a local deployment).
    """
    try:
        target_origin = origin_of(target)
    except ValueError:
        return f"the card names an endpoint that is not an http(s) URL: {target!r}"
    if target_origin == origin_of(card_url):
        return None
    target_host = urlsplit(target).hostname or ""
    card_host = urlsplit(card_url).hostname or ""
    if await _is_inward(target_host) and not await _is_inward(card_host):
        return (
            f"the card at {card_url} names {target}, a private or loopback address: "
            "refused (a remote card may not point us at the local network)"
        )
    return None
