"""Access to the chat API: a bearer token, unless the server listens on loopback only."""

from __future__ import annotations

import ipaddress
import secrets

__all__ = ["is_loopback", "token_matches"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or name) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(expected: str | None, header: str | None, query: str | None) -> bool:
    """Whether a request carries ``expected`` (``Authorization: Bearer``, or ``?token=``);
    always true without a token."""
    if expected is None:
        return True
    given = query
    if header is not None and header.lower().startswith("bearer "):
        given = header[7:].strip()
    return given is not None and secrets.compare_digest(given.encode(), expected.encode())
