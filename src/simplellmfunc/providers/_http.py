"""The HTTP layer shared by every HTTP provider: keys, rate limit, retries, deadlines, errors."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import httpx

from .._resource import AsyncResource
from .._unicode import loads_reply
from ..exceptions import (
    AuthenticationError,
    EmptyReplyError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    UserError,
)
from ._body import Body, RequestBody
from ._failures import origin, response_error, timeout_error
from ._keys import APIKeyPool
from ._ratelimit import TokenBucket
from ._reading import read_all
from ._redact import fingerprint, redact
from ._retry import RetryPolicy

__all__ = ["HTTPSettings", "HTTPTransport", "OpenResponse"]

logger = logging.getLogger("simplellmfunc.providers")

AuthHeaders = Callable[[str], Mapping[str, str]]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HTTPSettings:
    """Connection settings of an HTTP provider.

    Args:
        timeout: Overall deadline per call in seconds, retries and streaming included.
        connect_timeout: Seconds to establish a connection.
        read_timeout: Seconds to wait for each chunk of a response.
        max_connections: Connection pool size (HTTP/1.1 keep-alive), and how many requests
            the transport lets into httpx at once: the others wait in an
            ``anyio.Semaphore`` (within the call's deadline). httpcore scans its whole
            queue against every connection whenever a request starts or ends, so hundreds of
            requests queued inside it cost milliseconds of CPU per call; queued here they cost
            nothing. The transport's own client is several pools of at most 10 connections
            (one ``httpx.AsyncClient`` each), each request going to one with a free
            connection: httpcore's bookkeeping per request grows with the square of a pool's
            size (a ``http_client=`` of the caller is one pool).
    """

    timeout: float = 600.0
    connect_timeout: float = 10.0
    read_timeout: float = 120.0
    max_connections: int = 100


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
        #: What errors name: ``scheme://host:port`` (no credentials, path or query).
        self.target = origin(self.base_url)
        self.keys = keys
        self.provider = provider
        self.retry = retry
        self.settings = settings
        self.rate_limit = rate_limit
        self._auth = auth
        self._headers = {"content-type": "application/json", **(headers or {})}
        # Parsed once, not per request: the URL of each path, the headers of each key.
        self._urls: dict[str, httpx.URL] = {}
        self._request_headers: dict[str | None, httpx.Headers] = {}
        self._own_client = client is None
        # Created on first use, inside the event loop (anyio picks its backend then).
        self._slots: anyio.Semaphore | None = None
        # The pools (shards) of the transport's own client, each made on its first request
        # (the first one now) and all on one SSL context: making one per client costs 10-100 ms.
        # A caller's ``http_client=`` is one pool.
        self._closed = False
        self._sizes = (
            [settings.max_connections] if client else _shard_sizes(settings.max_connections)
        )
        self._ssl: ssl.SSLContext | None = None
        self._clients: list[httpx.AsyncClient | None] = [client] + [None] * (len(self._sizes) - 1)
        if client is None:
            self._clients[0] = self._make_client(0)
        #: One entry per connection slot: the index of the client (shard) it belongs to. Taking
        #: a slot pops one, giving it back pushes it (last in, first out: the connection used
        #: last, still open, serves the next request); the semaphore in front guarantees one is
        #: there. A shard never holds more requests than connections, so none queues in httpcore.
        self._free_shards = [i for i, size in enumerate(self._sizes) for _ in range(size)][::-1]

    def _make_client(self, shard: int) -> httpx.AsyncClient:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context()  # what httpx.AsyncClient() makes
        connections = self._sizes[shard]
        return httpx.AsyncClient(
            verify=self._ssl,
            timeout=httpx.Timeout(
                self.settings.read_timeout,
                connect=self.settings.connect_timeout,
                pool=self.settings.timeout,
            ),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        )

    async def aclose(self) -> None:
        """Close the client (when this transport created it); idempotent."""
        if self._own_client:
            self._closed = True  # no pool is made after this
            for client in self._clients:
                if client is not None:
                    await client.aclose()

    def deadline(self, timeout: float | None) -> float:
        """The absolute deadline of a call starting now."""
        return anyio.current_time() + (timeout or self.settings.timeout)

    def _secrets(self) -> tuple[str, ...]:
        return self.keys.keys if self.keys else ()

    async def post_json(
        self,
        path: str,
        body: Body,
        deadline: float,
        parse: Callable[[dict[str, Any], httpx.Headers], T],
    ) -> T:
        """POST ``body`` and return ``parse(json_object, response_headers)``.

        A ``body`` function is called once the first attempt holds its connection slot: a
        call queued for a slot (thousands of them, at scale) holds neither the wire body nor
        its JSON.

        Unlike :meth:`open`, a connection that breaks while the body is read is retried, and so
        is a reply ``parse`` finds empty (a retryable :class:`EmptyReplyError`): nothing has
        reached the caller yet.

        Raises:
            ProviderError: (a subclass) after the retries are spent or for a non-retryable error;
                whatever ``parse`` raises.
            UserError: When the interface was closed.
        """
        content = RequestBody(body)
        attempt = 0
        while True:
            response, hold, attempt = await self._connect(path, content, deadline, attempt)
            try:
                try:
                    raw = await self._read_within(response, deadline, attempt)
                finally:
                    await response.aclose()
                    self._release(hold)
                return parse(self._decode(raw, response), response.headers)
            except (ProviderConnectionError, EmptyReplyError) as error:
                error.attempts = attempt
                await self.wait_to_retry(error, attempt, deadline)

    async def read_json(
        self, response: httpx.Response, deadline: float, attempt: int = 1
    ) -> dict[str, Any]:
        """The whole body of an opened response as a JSON object (see :meth:`open`);
        ``attempt`` is the opener's, which errors report.

        Raises:
            ProviderTimeoutError: When the deadline passes.
            ProviderConnectionError: When the connection breaks.
            ProviderError: When the body is not a JSON object.
        """
        return self._decode(await self._read_within(response, deadline, attempt), response)

    def _decode(self, raw: bytes, response: httpx.Response) -> dict[str, Any]:
        """The body as a JSON object; invalid UTF-8 and escaped lone surrogates become U+FFFD.

        Raises:
            ProviderError: When the body is not a JSON object.
        """
        try:
            data = loads_reply(raw.decode("utf-8-sig", "replace"))
        except ValueError as exc:
            text = raw.decode(errors="replace")
            raise self._error(ProviderError, "response is not valid JSON", response, text) from exc
        if not isinstance(data, dict):
            raise self._error(ProviderError, "response is not a JSON object", response, "")
        return data

    async def _read_within(self, response: httpx.Response, deadline: float, attempt: int) -> bytes:
        """The whole (decoded) body, read within the deadline.

        Raises:
            ProviderTimeoutError: When the deadline passes.
            ProviderConnectionError: When the connection breaks (retryable).
        """
        try:
            return await read_all(response, deadline)
        except TimeoutError:
            raise self._timeout(attempt, f"while reading the reply from {self.target}") from None
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(
                f"{self.provider}: connection to {self.target} failed while reading the reply: "
                f"{type(exc).__name__}",
                status=response.status_code,
                provider=self.provider,
                attempts=attempt,
                retryable=True,
            ) from exc

    def open(self, path: str, body: Body, deadline: float, attempt: int = 0) -> OpenResponse:
        """``async with transport.open(...) as opened``: send the request, retrying until a
        2xx response's headers arrive (``opened.response``).

        The body is not read; nothing is retried once the block is entered. The response is
        closed (and the key released) when the block exits, however it exits. ``attempt`` is
        the number of attempts the call made before (they count against the retry policy);
        the opener's ``attempt`` is the number of the one that got the response. A ``body``
        function is called as :meth:`post_json` calls it.

        Raises:
            ProviderError: (a subclass, on entering) after the retries are spent or for a
                non-retryable error.
            UserError: (on entering) when the interface was closed.
        """
        return OpenResponse(self, path, RequestBody(body), deadline, attempt)

    async def _connect(
        self, path: str, content: RequestBody, deadline: float, attempt: int = 0
    ) -> tuple[httpx.Response, Hold, int]:
        """Retry until a 2xx response's headers arrive.

        Returns:
            The response (body unread), what it holds (its key and connection slot: release
            it with :meth:`_release` once the response is closed) and the number of the
            attempt that succeeded.

        Raises:
            ProviderError: (a subclass) after the retries are spent or for a non-retryable error.
        """
        while True:
            attempt += 1
            hold = Hold(await self._acquire(deadline, attempt))
            try:
                await self._take_slot(hold, deadline, attempt)
                outcome = await self._attempt(
                    hold.shard, path, content.encoded(), hold.key, deadline, attempt
                )
            except BaseException:  # boundary: cleanup, re-raised: the slot goes back
                self._release(hold)
                raise
            if isinstance(outcome, httpx.Response):
                return outcome, hold, attempt
            self._release(hold)  # before the wait: a sleeping call is not in flight
            error, delay = outcome
            await self.wait_to_retry(error, attempt, deadline, delay)

    async def _take_slot(self, hold: Hold, deadline: float, attempt: int) -> None:
        """One of the ``max_connections`` slots for ``hold``, waiting within the deadline.

        The wait happens outside the ``except WouldBlock`` block, and ``anyio.Semaphore``
        waits on a bare future: a call queued here holds no exception, traceback or frame
        (with a ``CapacityLimiter`` it held two of each, about 1.5 KB per queued call).

        Raises:
            ProviderTimeoutError: When the deadline passes first.
        """
        slots = self._slots
        if slots is None:
            slots = self._slots = anyio.Semaphore(self.settings.max_connections, fast_acquire=True)
        try:
            slots.acquire_nowait()  # the common case: no scope to pay for
            hold.slots = slots
            hold.shard = self._free_shards.pop()
            return
        except anyio.WouldBlock:
            pass  # wait below, once the exception is gone
        with anyio.CancelScope(deadline=deadline) as scope:
            await slots.acquire()
        if scope.cancelled_caught:
            raise self._timeout(attempt, f"waiting for a connection to {self.target}") from None
        hold.slots = slots
        hold.shard = self._free_shards.pop()

    async def _acquire(self, deadline: float, attempt: int) -> str | None:
        if self.rate_limit is None:
            # The common cases: no limits, or a key ready now. No cancel scope to pay for.
            if self.keys is None:
                return None
            if (key := self.keys.try_acquire()) is not None:
                return key
        try:
            with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                if self.rate_limit is not None:
                    await self.rate_limit.acquire()
                return await self.keys.acquire() if self.keys is not None else None
        except TimeoutError:
            waiting = f"waiting for an API key or the rate limit ({self.target})"
            raise self._timeout(attempt, waiting) from None

    def _release(self, hold: Hold) -> None:
        """Give back what an attempt held (idempotent)."""
        slots, hold.slots = hold.slots, None
        if slots is not None:
            self._free_shards.append(hold.shard)  # before release: a woken waiter pops it
            slots.release()
        key, hold.key = hold.key, None
        if key is not None and self.keys is not None:
            self.keys.release(key)

    async def _attempt(
        self,
        shard: int,
        path: str,
        content: bytes,
        key: str | None,
        deadline: float,
        attempt: int,
    ) -> httpx.Response | tuple[ProviderError, float | None]:
        """One attempt: the 2xx response, or the failure and the wait it asks for (``None``:
        the policy's backoff). The send itself is inline: one coroutine frame less, resumed
        on every event-loop pass of the call.

        Raises:
            ProviderError: (a subclass) when the failure cannot be retried.
        """
        client = self._clients[shard]
        if self._closed or (client is not None and client.is_closed):
            raise UserError(f"{self.provider}: the interface is closed (aclose() was called)")
        if client is None:
            client = self._clients[shard] = self._make_client(shard)
        request = client.build_request(
            "POST", self._url(path), content=content, headers=self._headers_for(key)
        )
        response: httpx.Response | None = None
        try:
            # A bare scope: fail_after's context-manager layers cost more, on every call.
            with anyio.CancelScope(deadline=deadline):
                response = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            return ProviderConnectionError(
                f"{self.provider}: connection to {self.target} failed: {type(exc).__name__}: "
                f"{redact(str(exc), self._secrets())}",
                provider=self.provider,
                attempts=attempt,
                retryable=True,
            ), None
        if response is None:  # the deadline cancelled the send
            raise self._timeout(attempt, f"before {self.target} answered")
        if response.is_success:
            return response
        return await self._failure(response, key, attempt, deadline)

    def _url(self, path: str) -> httpx.URL:
        url = self._urls.get(path)
        if url is None:
            url = self._urls[path] = httpx.URL(self.base_url + path)
        return url

    def _headers_for(self, key: str | None) -> httpx.Headers:
        headers = self._request_headers.get(key)
        if headers is None:
            extra = self._auth(key) if key is not None else {}
            headers = self._request_headers[key] = httpx.Headers({**self._headers, **extra})
        return headers

    async def _failure(
        self, response: httpx.Response, key: str | None, attempt: int, deadline: float
    ) -> tuple[ProviderError, float]:
        """Read an error response, update the key pool; return the error and the wait."""
        try:
            raw = await self._read_within(response, deadline, attempt)
        except ProviderConnectionError:
            raw = b""  # the status says enough; the body is only an excerpt
        finally:
            await response.aclose()
        status = response.status_code
        headers = response.headers
        kind: type[ProviderError] = ProviderError
        delay = self.retry.delay(attempt - 1, headers)
        if status == 429:
            kind = RateLimitError
            if key is not None and self.keys is not None:
                # Cool the key for as long as the retry waits (Retry-After within the cap), so a
                # huge Retry-After cannot park a one-key pool beyond the policy.
                self.keys.cool_down(key, delay)
                if self.keys.has_ready_key():
                    delay = 0.0  # another key is fresh: no reason to wait
        elif status in (401, 403):
            kind = AuthenticationError
            if key is not None and self.keys is not None:
                self.keys.disable(key, f"HTTP {status}")
        error = self._error(kind, f"HTTP {status}", response, raw.decode(errors="replace"), attempt)
        if status in (401, 403) and self.keys is not None and len(self.keys) > 1:
            error.retryable = self.keys.has_live_key()  # try the next key at once
            delay = 0.0
        else:
            error.retryable = self.retry.should_retry(status, headers)
        return error, delay

    async def wait_to_retry(
        self, error: ProviderError, attempt: int, deadline: float, delay: float | None = None
    ) -> None:
        """Sleep before the attempt after ``attempt`` (``delay`` ``None``: the policy's backoff).

        Raises:
            ProviderError: ``error`` itself, when it is final: not retryable, the retries are
                spent, or the wait would pass the deadline.
        """
        if not error.retryable or attempt > self.retry.max_retries:
            raise error
        if delay is None:
            delay = self.retry.delay(attempt - 1, {})
        if anyio.current_time() + delay >= deadline:
            raise error  # the last real error says more than a timeout would
        logger.info(
            "%s; retry %d/%d in %.3fs",
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
        return response_error(
            kind,
            message,
            response,
            body,
            provider=self.provider,
            secrets=self._secrets(),
            attempt=attempt,
        )

    def _timeout(self, attempt: int, when: str) -> ProviderTimeoutError:
        return timeout_error(self.provider, attempt, when)

    def key_label(self, key: str | None) -> str:
        """A loggable label of ``key``."""
        return fingerprint(key) if key else "-"


#: Connections per pool (shard) of a transport's own client: httpcore walks every connection
#: of a pool (and, to decide on keep-alive, all of them again per idle one) whenever a request
#: starts or ends, so its CPU per request grows with the square of the pool's size.
_SHARD = 10


def _shard_sizes(connections: int) -> list[int]:
    """``connections`` split into pools of at most :data:`_SHARD` (as even as they go)."""
    count = max(-(-connections // _SHARD), 1)
    base, extra = divmod(connections, count)
    return [base + (i < extra) for i in range(count)]


class Hold:
    """What one attempt holds until its response is closed: an API key (``None``: no key
    pool) and a connection slot (the semaphore it was taken from, once taken)."""

    __slots__ = ("key", "shard", "slots")

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.slots: anyio.Semaphore | None = None
        self.shard = 0


class OpenResponse(AsyncResource):
    """What :meth:`HTTPTransport.open` returns: ``async with`` sends the request (retrying until
    the response's headers arrive), :attr:`response` is the response, and leaving closes it and
    releases what it holds (a class, not a generator: it is on every streamed call's path)."""

    __slots__ = ("_content", "_deadline", "_hold", "_path", "_response", "_transport", "attempt")

    def __init__(
        self,
        transport: HTTPTransport,
        path: str,
        content: RequestBody,
        deadline: float,
        attempt: int,
    ):
        self._transport = transport
        self._path = path
        self._content = content
        self._deadline = deadline
        self._response: httpx.Response | None = None
        self._hold: Hold | None = None
        self.attempt = attempt

    @property
    def response(self) -> httpx.Response:
        """The response, body unread (once opened).

        Raises:
            UserError: Before the opener is entered.
        """
        if self._response is None:
            raise UserError("the response is there once `async with transport.open(...)` entered")
        return self._response

    async def open(self) -> None:
        """Send the request, retrying until a 2xx response's headers arrive."""
        connect = self._transport._connect
        self._response, self._hold, self.attempt = await connect(
            self._path, self._content, self._deadline, self.attempt
        )

    async def aclose(self) -> None:
        """Close the response and release its key and connection slot (idempotent)."""
        response, self._response = self._response, None
        hold, self._hold = self._hold, None
        try:
            if response is not None:
                await response.aclose()
        finally:
            if hold is not None:
                self._transport._release(hold)
