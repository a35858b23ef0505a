"""The mock LLM server: a small, strict HTTP/1.1 server on loopback built on ``asyncio.Protocol``.

Why a hand-made server on asyncio primitives instead of an anyio task group:

- Speed: benchmarks drive hundreds of concurrent httpx clients at it, so it must never be the
  bottleneck. A response that needs no waiting is parsed and written inside ``data_received``,
  with no task, no stream object and one ``write`` call.
- Byte-level control: faults (split UTF-8, mid-stream disconnects, malformed lines) need exact
  control over what each write sends.
- Lifetime: ``async with MockLLMServer()`` may be entered and exited in different tasks (pytest
  async fixtures do that), which a task group held across ``__aenter__``/``__aexit__`` forbids.
  Responses that wait (delays, drip) run in tasks the server owns; closing the server aborts
  every connection, cancels those tasks and waits for them, so nothing outlives ``aclose``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator
from itertools import count
from typing import Any, Final, Self

import anyio

from .._resource import AsyncResource
from ..exceptions import UserError
from ._render_anthropic import CountTokensRenderer, MessagesRenderer
from ._render_embeddings import EmbeddingsRenderer
from ._render_openai import ChatCompletionsRenderer
from ._render_responses import ResponsesRenderer
from ._script import RecordedRequest, Reply, Script, ScriptItem, redact_headers
from ._wire import CLOSE, Renderer, RequestHead, Step, build_plan, parse_head, simple_response

__all__ = ["MockLLMServer"]

_CLOSE_TIMEOUT: Final = 5.0
_DONE: Final = -1.0  # _advance result: the plan is finished
_ENDED: Final = -2.0  # _advance result: the connection was closed


class _Connection(asyncio.Protocol):
    """One client connection: parses requests and runs response plans, one at a time."""

    def __init__(self, server: MockLLMServer) -> None:
        self._server = server
        self._buf = bytearray()
        self._head: RequestHead | None = None
        self._transport: asyncio.Transport | None = None
        self._task: asyncio.Task[None] | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        if self._server._closed:
            transport.abort()  # accepted just before the server closed
            return
        self._server._connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._server._connections.discard(self)
        if self._task is not None:
            self._task.cancel()
        if not self.lost.done():
            self.lost.set_result(None)

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if self._task is None:
            self._process()

    def eof_received(self) -> bool:
        return False  # the client is gone: close our side too

    def abort(self) -> asyncio.Task[None] | None:
        """Drop the connection now; return the response task to wait for, if any."""
        if self._transport is not None:
            self._transport.abort()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
        return task

    def _process(self) -> None:
        transport = self._transport
        while transport is not None and self._task is None and not transport.is_closing():
            if self._head is None:
                head = parse_head(self._buf)
                if head is None:
                    return
                if isinstance(head, int):
                    transport.write(simple_response(head, _error("malformed request"), False))
                    transport.close()
                    return
                self._head = head
                del self._buf[: head.size]
            head = self._head
            if len(self._buf) < head.content_length:
                return
            body = bytes(self._buf[: head.content_length])
            del self._buf[: head.content_length]
            self._head = None
            self._run(self._server._respond(head, body), head.keep_alive)

    def _run(self, plan: Iterator[Step], keep_alive: bool) -> None:
        wait = self._advance(plan)
        if wait >= 0:
            loop = asyncio.get_running_loop()
            self._task = loop.create_task(self._run_async(wait, plan, keep_alive))
        elif wait == _DONE and not keep_alive and self._transport is not None:
            self._transport.close()

    async def _run_async(self, wait: float, plan: Iterator[Step], keep_alive: bool) -> None:
        while wait >= 0:
            await asyncio.sleep(wait)
            wait = self._advance(plan)
        self._task = None
        if wait == _DONE and self._transport is not None:
            if keep_alive:
                self._process()
            else:
                self._transport.close()

    def _advance(self, plan: Iterator[Step]) -> float:
        """Write steps until one says to wait; return the wait, ``_DONE`` or ``_ENDED``."""
        transport = self._transport
        assert transport is not None
        pending: list[bytes] = []
        for step in plan:
            if isinstance(step, bytes):
                pending.append(step)
                continue
            if transport.is_closing():
                return _ENDED
            transport.write(b"".join(pending))
            pending.clear()
            if step is CLOSE:
                transport.close()
                return _ENDED
            return float(step)
        if transport.is_closing():
            return _ENDED
        transport.write(b"".join(pending))
        return _DONE


class MockLLMServer(AsyncResource):
    """A real HTTP/1.1 LLM API server on ``127.0.0.1``, scripted per test.

    Example:
        >>> async with MockLLMServer() as server:
        ...     server.script(Reply.text("Hello world", chunks=3))
        ...     # POST f"{server.url}/chat/completions" with any HTTP client

    Speaks OpenAI Chat Completions, OpenAI Responses and Anthropic Messages (JSON and SSE), each
    rendered from the same provider-neutral replies, and OpenAI Embeddings (deterministic
    hashed bag-of-words vectors, unscripted: see ``hashed_embedding``). Each request to an API
    endpoint consumes the next scripted reply (see :meth:`script`); when none is left the
    ``default`` answers, and without a default the server answers HTTP 500 ``no scripted
    reply``. Every request is
    recorded in :attr:`requests`, with credentials replaced by fingerprints.

    A body that is not valid UTF-8 is answered HTTP 400 (JSON must be UTF-8, and real APIs refuse
    it); lone surrogates sent as JSON ``\\udcff`` escapes are taken, recorded as they decode, and
    sent back as escapes wherever a reply echoes them.

    A scripted callable that raises makes the server answer HTTP 500; the first such exception is
    raised again by :meth:`aclose` (so when the ``async with`` block exits; noted on the block's
    own error when one is leaving), so failed assertions inside callables are not lost.

    Args:
        default: The reply (or callable) used when the script is empty.
        port: Port to listen on (0 picks a free one).
        max_records: Keep only the last ``max_records`` requests (``None``: all of them). A
            long-running server (benchmarks, demos) must bound them, or its memory grows without
            end and garbage collection slows every response.
    """

    def __init__(
        self, *, default: ScriptItem | None = None, port: int = 0, max_records: int | None = None
    ) -> None:
        self._script = Script(default)
        self._port = port
        self._requests: deque[RecordedRequest] = deque(maxlen=max_records)
        self._connections: set[_Connection] = set()
        self._server: asyncio.Server | None = None
        self._closed = False
        self._seq = count(1)
        self._callable_errors: list[Exception] = []
        self._routes: dict[str, Renderer] = {
            "/v1/chat/completions": ChatCompletionsRenderer(),
            "/v1/responses": ResponsesRenderer(),
            "/v1/messages": MessagesRenderer(),
            "/v1/messages/count_tokens": CountTokensRenderer(),
            "/v1/embeddings": EmbeddingsRenderer(),
        }

    @property
    def default(self) -> ScriptItem | None:
        """The reply used when the script is empty (settable)."""
        return self._script.default

    @default.setter
    def default(self, value: ScriptItem | None) -> None:
        self._script.default = value

    @property
    def port(self) -> int:
        """The port the server listens on.

        Raises:
            UserError: When the server is not running.
        """
        if self._server is None:
            raise UserError("MockLLMServer is not running; use `async with MockLLMServer()`")
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    @property
    def url(self) -> str:
        """Base URL including ``/v1``, e.g. ``http://127.0.0.1:PORT/v1``.

        Raises:
            UserError: When the server is not running.
        """
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        return list(self._requests)

    @property
    def pending(self) -> int:
        """How many scripted replies are still queued."""
        return len(self._script)

    def script(self, *replies: ScriptItem) -> None:
        """Queue replies, consumed one per request in order.

        Each is a :class:`Reply` or a callable ``(RecordedRequest) -> Reply``.

        Raises:
            UserError: When an item is neither.
        """
        self._script.push(replies)

    def reset(self) -> None:
        """Forget queued replies and recorded requests (the default stays)."""
        self._script.clear()
        self._requests.clear()
        self._callable_errors.clear()

    async def open(self) -> None:
        """Start listening (``async with`` does this).

        Raises:
            UserError: When the server is already running.
        """
        if self._server is not None:
            raise UserError("MockLLMServer is already running")
        loop = asyncio.get_running_loop()
        self._closed = False
        self._server = await loop.create_server(
            lambda: _Connection(self), "127.0.0.1", self._port, backlog=4096
        )

    async def start(self) -> Self:
        """:meth:`open`, returning the server (``server = await MockLLMServer().start()``)."""
        await self.open()
        return self

    async def aclose(self) -> None:
        """Stop listening, drop every connection and wait for the response tasks (idempotent).

        Raises:
            Exception: The first exception a scripted callable raised since the server opened
                (once), so that a failed assertion inside a callable is not lost.
        """
        server, self._server = self._server, None
        if server is None:
            return
        self._closed = True
        server.close()
        with anyio.move_on_after(_CLOSE_TIMEOUT, shield=True):
            while self._connections:
                connections = list(self._connections)
                tasks = [task for conn in connections if (task := conn.abort()) is not None]
                lost = [conn.lost for conn in connections]
                await asyncio.gather(*tasks, *lost, return_exceptions=True)
            await server.wait_closed()
        if self._callable_errors:
            first = self._callable_errors[0]
            self._callable_errors.clear()
            raise first

    def _respond(self, head: RequestHead, body: bytes) -> Iterator[Step]:
        seq = next(self._seq)
        parsed, problem = _parse_body(body)
        request = RecordedRequest(
            head.method, head.target, redact_headers(head.headers), parsed, len(body)
        )
        self._requests.append(request)
        renderer = self._routes.get(head.target.partition("?")[0])
        if renderer is None:
            return self._fail(404, f"no route for {head.method} {head.target}", head)
        if head.method != "POST":
            return self._fail(405, f"{head.method} not allowed", head)
        if not isinstance(parsed, dict):
            return self._fail(400, problem or "the body must be a JSON object", head)
        if not getattr(renderer, "scripted", True):  # e.g. count_tokens: no reply consumed
            return build_plan(Reply(), renderer.render(Reply(), request, seq), head.keep_alive, seq)
        try:
            reply = self._script.next_reply(request)
        except Exception as exc:  # boundary: a test's callable failed; answer and report later
            self._callable_errors.append(exc)
            return self._fail(500, f"scripted callable raised {type(exc).__name__}: {exc}", head)
        if reply is None:
            return self._fail(500, "no scripted reply", head)
        rendered = renderer.render(reply, request, seq)
        return build_plan(reply, rendered, head.keep_alive, seq)

    def _fail(self, status: int, message: str, head: RequestHead) -> Iterator[Step]:
        yield simple_response(status, _error(message), head.keep_alive)


def _parse_body(body: bytes) -> tuple[Any, str | None]:
    """The JSON of a request body (``None`` when empty or invalid) and what is wrong with it.

    JSON text must be UTF-8 (RFC 8259), so a body that is not is refused, as real APIs do; a
    lone surrogate sent as a ``\\udcff`` escape is valid JSON and is taken as it is.
    """
    if not body:
        return None, None
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        return None, f"the body is not valid UTF-8 (byte {exc.start})"
    try:
        return json.loads(text), None
    except ValueError:
        return None, None


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "mock_server_error", "param": None, "code": None}}
