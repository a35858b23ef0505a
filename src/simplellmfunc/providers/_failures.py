"""What an HTTP failure becomes: a typed :class:`ProviderError` that names the server by its
origin and carries an excerpt of the reply, never a key."""

from __future__ import annotations

import json
from typing import Final

import httpx

from ..exceptions import ProviderError, ProviderTimeoutError
from ._redact import redact

__all__ = ["origin", "response_error", "timeout_error"]

_EXCERPT: Final = 500
_DETAIL: Final = 300
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def origin(url: str) -> str:
    """``scheme://host:port`` of ``url``, the port given even when it is the default: what an
    error names. Never credentials, a path or a query string, where keys sometimes travel.

    A URL that is not ``http(s)://host...`` (a typo: ``"localhost:8000/v1"``) is named as
    written, without its query string and credentials.
    """
    try:
        parsed: httpx.URL | None = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or not parsed.host or parsed.scheme not in _DEFAULT_PORTS:
        bare = url.partition("?")[0].rpartition("@")[2]
        return f"{bare} (not an http:// or https:// URL)"
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
    return f"{parsed.scheme}://{host}:{port}"


def response_error(
    kind: type[ProviderError],
    message: str,
    response: httpx.Response,
    body: str,
    *,
    provider: str,
    secrets: tuple[str, ...],
    attempt: int = 1,
) -> ProviderError:
    """A ``kind`` error for ``response`` (its status and request id), the server's own message
    and an excerpt of ``body`` attached, every one of ``secrets`` redacted."""
    request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
    # Redact before cutting: a cut through a key would leave a piece no pattern matches.
    detail = redact(_error_message(body), secrets)[:_DETAIL]
    return kind(
        f"{provider}: {message}" + (f": {detail}" if detail else ""),
        status=response.status_code,
        request_id=request_id,
        attempts=attempt,
        body_excerpt=redact(body[: _EXCERPT * 4], secrets)[:_EXCERPT],
        provider=provider,
    )


def timeout_error(provider: str, attempt: int, when: str) -> ProviderTimeoutError:
    """The call's deadline passed ``when`` (``"before … answered"``, ``"while reading …"``)."""
    return ProviderTimeoutError(
        f"{provider}: call deadline passed {when}", provider=provider, attempts=attempt
    )


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[: _DETAIL * 4]
        if isinstance(error, str):
            return error[: _DETAIL * 4]
    return ""
