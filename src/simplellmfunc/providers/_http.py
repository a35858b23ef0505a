"""The HTTP layer shared by every HTTP provider: keys, rate limit, retries, deadlines, errors."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from ..exceptions import (
    AuthenticationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
)
from ._keys import APIKeyPool
from ._ratelimit import TokenBucket
from ._redact import fingerprint, redact
from ._retry import RetryPolicy, retry_after_seconds

__all__ = ["HTTPSettings", "HTTPTransport"]

logger = logging.getLogger("simplellmfunc.providers")

AuthHeaders = Callable[[str], Mapping[str, str]]
_EXCERPT = 500


@dataclass(frozen=True, slots=True)
class HTTPSettings:
    """Connection settings of an HTTP provider.

    Args:
        timeout: Overall deadline per call in seconds, retries and streaming included.
        connect_timeout: Seconds to establish a connection.
        read_timeout: Seconds to wait for each chunk of a response.
        max_connections: Connection pool size (HTTP/1.1 keep-alive).
    """

    timeout: float = 600.0
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    max_connections: int = 1000


class HTTPTransport:
    """POSTs JSON with retries, one ``httpx.AsyncClient`` per interface."""

    def __init__(
        self,
        *,
        base_url: str,
        keys: APIKeyPool | None,
        auth: AuthHeaders,
        provider: str,
        retry: RetryPolicy,
        settings: HTTPSettings,
        rate_limit: TokenBucket | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.keys = keys
        self.provider = provider
        self.retry = retry
        self.settings = settings
        self.rate_limit = rate_limit
        self._auth = auth
        self._headers = dict(headers or {})
        self._own_client = client is None
        self._client = client or httpx.AsyncClient(
            timeout=httpx.Timeout(
                settings.read_timeout, connect=settings.connect_timeout, pool=settings.timeout
            ),
            limits=httpx.Limits(
                max_connections=settings.max_connections,
                max_keepalive_connections=settings.max_connections,
            ),
        )

    async def aclose(self) -> None:
        """Close the client (when this transport created it)."""
        if self._own_client:
            await self._client.aclose()

    def deadline(self, timeout: float | None) -> float:
        """The absolute deadline of a call starting now."""
        return anyio.current_time() + (timeout or self.settings.timeout)

    def _secrets(self) -> tuple[str, ...]:
        return self.keys.keys if self.keys else ()

    async def post_json(
        self, path: str, body: Mapping[str, Any], deadline: float
    ) -> tuple[dict[str, Any], httpx.Headers]:
        """POST ``body`` and return the decoded JSON object and the response headers.

        Raises:
            ProviderError: (a subclass) after the retries are spent or for a non-retryable error.
        """
        async with self.open(path, body, deadline) as response:
            raw = await self._read_within(response, deadline)
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise self._error(
                ProviderError, "response is not valid JSON", response, raw.decode(errors="replace")
            ) from exc
        if not isinstance(data, dict):
            raise self._error(ProviderError, "response is not a JSON object", response, "")
        return data, response.headers

    async def _read_within(self, response: httpx.Response, deadline: float) -> bytes:
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                return await response.aread()
        except TimeoutError:
            raise self._timeout(1) from None
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(
                f"connection failed while reading: {type(exc).__name__}", provider=self.provider
            ) from exc

    @asynccontextmanager
    async def open(
        self, path: str, body: Mapping[str, Any], deadline: float
    ) -> AsyncIterator[httpx.Response]:
        """Send the request, retrying until a 2xx response's headers arrive, and yield it.

        The body is not read; nothing is retried after this yields.

        Raises:
            ProviderError: (a subclass) after the retries are spent or for a non-retryable error.
        """
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        attempt = 0
        while True:
            attempt += 1
            key = await self._acquire(deadline, attempt)
            try:
                try:
                    response = await self._send(path, content, key, deadline, attempt)
                except ProviderConnectionError as error:
                    error.attempts = attempt
                    await self._maybe_sleep(error, None, attempt, deadline)
                    continue
                if response.is_success:
                    try:
                        yield response
                    finally:
                        await response.aclose()
                    return
                await self._handle_failure(response, key, attempt, deadline)
            finally:
                if key is not None and self.keys is not None:
                    self.keys.release(key)

    async def _acquire(self, deadline: float, attempt: int) -> str | None:
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                if self.rate_limit is not None:
                    await self.rate_limit.acquire()
                return await self.keys.acquire() if self.keys is not None else None
        except TimeoutError:
            raise self._timeout(attempt) from None

    async def _send(
        self, path: str, content: bytes, key: str | None, deadline: float, attempt: int
    ) -> httpx.Response:
        headers = {"content-type": "application/json", **self._headers}
        if key is not None:
            headers.update(self._auth(key))
        request = self._client.build_request(
            "POST", f"{self.base_url}{path}", content=content, headers=headers
        )
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                return await self._client.send(request, stream=True)
        except TimeoutError:
            raise self._timeout(attempt) from None
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(
                f"connection failed: {type(exc).__name__}: {redact(str(exc), self._secrets())}",
                provider=self.provider,
                attempts=attempt,
                retryable=True,
            ) from exc

    async def _handle_failure(
        self, response: httpx.Response, key: str | None, attempt: int, deadline: float
    ) -> None:
        """Read the error, update the key pool, then sleep before a retry or raise."""
        text = (await self._read_within(response, deadline)).decode(errors="replace")
        await response.aclose()
        status = response.status_code
        kind: type[ProviderError] = ProviderError
        if status == 429:
            kind = RateLimitError
            if key is not None and self.keys is not None:
                self.keys.cool_down(key, retry_after_seconds(response.headers) or 1.0)
        elif status in (401, 403):
            kind = AuthenticationError
            if key is not None and self.keys is not None:
                self.keys.disable(key, f"HTTP {status}")
        error = self._error(kind, f"HTTP {status}", response, text, attempt)
        if status in (401, 403) and self.keys is not None and len(self.keys) > 1:
            error.retryable = any(s["disabled"] is None for s in self.keys.status())
        else:
            error.retryable = self.retry.should_retry(status, response.headers)
        await self._maybe_sleep(error, response.headers, attempt, deadline)

    async def _maybe_sleep(
        self,
        error: ProviderError,
        headers: httpx.Headers | None,
        attempt: int,
        deadline: float,
    ) -> None:
        if not error.retryable or attempt > self.retry.max_retries:
            raise error
        delay = self.retry.delay(attempt - 1, headers or {})
        if error.status in (401, 403):
            delay = 0.0
        if anyio.current_time() + delay >= deadline:
            raise error
        logger.info(
            "%s: %s; retry %d/%d in %.2fs",
            self.provider,
            error.message,
            attempt,
            self.retry.max_retries,
            delay,
        )
        await anyio.sleep(delay)

    def _error(
        self,
        kind: type[ProviderError],
        message: str,
        response: httpx.Response,
        body: str,
        attempt: int = 1,
    ) -> ProviderError:
        request_id = response.headers.get("x-request-id") or response.headers.get("request-id")
        detail = _error_message(body)
        return kind(
            f"{self.provider}: {message}"
            + (f": {redact(detail, self._secrets())}" if detail else ""),
            status=response.status_code,
            request_id=request_id,
            attempts=attempt,
            body_excerpt=redact(body[:_EXCERPT], self._secrets()),
            provider=self.provider,
        )

    def _timeout(self, attempt: int) -> ProviderTimeoutError:
        return ProviderTimeoutError(
            f"{self.provider}: call deadline passed", provider=self.provider, attempts=attempt
        )

    def key_label(self, key: str | None) -> str:
        """A loggable label of ``key``."""
        return fingerprint(key) if key else "-"


def _error_message(body: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
    return ""
