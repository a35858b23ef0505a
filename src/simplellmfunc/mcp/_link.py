"""ServerLink: one MCP server's session, opened, kept, reconnected and closed."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio
import httpx2
import mcp.types as types
from anyio.abc import TaskGroup
from mcp import Client
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from .._abort import AbortSignal
from .._resource import AsyncResource
from ..exceptions import AbortedError, MCPError, UserError
from ._config import ServerSpec
from ._connection import Connection, ListKind, Options, supervise
from ._errors import connect_error, describe, translate

__all__ = ["ServerLink"]

logger = logging.getLogger("simplellmfunc.mcp")

T = TypeVar("T")

_RETRY_BACKOFF = 0.5  # seconds before the first retry of a failed call; doubled each time
_CLOSE_TIMEOUT = 8.0  # the stdio shutdown sequence needs up to ~6 s for a stubborn server
_CLIENT_INFO = types.Implementation(name="simplellmfunc", version="0.1.0")
_SDK_FAILURES = (SDKError, ValidationError, RuntimeError, httpx2.HTTPError, OSError)


class ServerLink(AsyncResource):
    """The session with one MCP server, shared by every request.

    Opened with ``async with`` (or :meth:`connect` and, in the same task, :meth:`aclose`). The
    session lives in a supervisor task; when it is lost (crash, disconnect, a server that forgot
    it) the next request opens a new one, up to ``max_reconnects`` attempts.
    """

    def __init__(
        self,
        spec: ServerSpec,
        *,
        name: str | None,
        connect_timeout: float,
        max_reconnects: int,
        mode: str,
    ) -> None:
        self.spec = spec
        self.name = name or spec.label
        self.max_reconnects = max(1, max_reconnects)
        self._options = Options(self.name, connect_timeout, mode, _CLIENT_INFO)
        self._group: TaskGroup | None = None
        self._owns_group = False
        self._owner_task: int | None = None
        self._conn: Connection | None = None
        self._open_lock = anyio.Lock()
        self._stale: set[ListKind] = set()

    @property
    def connected(self) -> bool:
        """Whether the toolset is open (its session may be reconnecting)."""
        return self._group is not None

    async def connect(self) -> None:
        """The earlier name of :meth:`open`.

        Raises:
            MCPError: As :meth:`open`.
        """
        await self.open()

    async def open(self) -> None:
        """Start (or reach) the server and open the session; a no-op when already open.

        Raises:
            MCPError: The server could not be started or reached within ``connect_timeout``;
                nothing is left running.
        """
        if self._group is not None:
            return
        group = anyio.create_task_group()
        await group.__aenter__()
        self._owns_group = True
        self._owner_task = anyio.get_current_task().id
        try:
            await self._attach(group)
        except BaseException:  # boundary: cleanup, re-raised: the task group is cancelled and left
            self._group = None
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
            raise

    async def aclose(self) -> None:
        """Close the session and stop a stdio server with its whole process group.

        Raises:
            UserError: When called from another task than :meth:`connect` (the session's
                task group belongs to that task); the server is stopped all the same.
        """
        group = self._group
        if group is None:
            return
        await self._detach()
        if not self._owns_group:
            return
        group.cancel_scope.cancel()
        if anyio.get_current_task().id != self._owner_task:
            raise UserError(
                f"MCP toolset {self.name} was closed in another task than the one that opened "
                "it; open and close it in one task, e.g. with 'async with toolset:' (the server "
                "was stopped)"
            )
        await group.__aexit__(None, None, None)

    async def _attach(self, group: TaskGroup) -> None:
        """Open the first session in ``group`` (owned by the caller for a server group)."""
        self._group = group
        await self._open(attempts=1)

    async def _detach(self) -> None:
        conn, self._conn, self._group = self._conn, None, None
        self._stale.update(("tools", "prompts", "resources"))  # the next session may differ
        if conn is None:
            return
        conn.close()
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
            await conn.ended.wait()

    async def _live(self) -> Connection:
        conn = self._conn
        if conn is not None and conn.alive:
            return conn
        async with self._open_lock:
            conn = self._conn
            if conn is not None and conn.alive:
                return conn
            return await self._open(self.max_reconnects)

    async def _open(self, attempts: int) -> Connection:
        group = self._group
        if group is None:
            raise MCPError(
                f"MCP toolset {self.name} is not open: use 'async with toolset:' "
                "or 'await toolset.connect()' first"
            )
        failure: Exception | None = None
        for attempt in range(attempts):
            if attempt:
                await anyio.sleep(min(0.25 * 2 ** (attempt - 1), 2.0))
            try:
                conn: Connection = await group.start(
                    supervise, self.spec, self._options, self._changed
                )
            except Exception as exc:  # boundary: why the server could not be reached
                failure = exc
                logger.warning("MCP server %s: cannot connect: %s", self.name, describe(exc))
                continue
            if self._conn is not None:
                self._stale.update(("tools", "prompts", "resources"))  # a new session
            self._conn = conn
            return conn
        timeout = self._options.connect_timeout
        raise connect_error(self.name, failure, attempts, timeout) from failure

    def _changed(self, kind: ListKind) -> None:
        self._stale.add(kind)

    # --- requests ----------------------------------------------------------------------------

    async def _request(
        self,
        what: str,
        send: Callable[[Client], Awaitable[T]],
        abort: AbortSignal | None = None,
        retries: int = 0,
    ) -> T:
        """Send one request on the live session, reconnecting first if it was lost.

        A request the server certainly did not act on is sent once more; with ``retries``, one
        that failed on a disconnect or a timeout (the server may have acted on it) is sent up
        to that many times more, after 0.5, 1, 2 ... seconds.

        Raises:
            MCPError: Saying what failed, on which server, and why.
            AbortedError: When ``abort`` fires first; the server is told to cancel.
        """
        resent, retried = False, 0
        while True:
            conn = await self._live()
            try:
                return await _abortable(send(conn.client), abort)
            except _SDK_FAILURES as exc:
                failure = translate(exc, what, self.name, conn.watch.rejected)
                if failure.lost:
                    conn.close()
                if failure.unsent and not resent:
                    resent = True
                    continue
                if failure.transient and retried < retries:
                    retried += 1
                    logger.info("MCP server %s: %s; retry %d", self.name, failure.error, retried)
                    await anyio.sleep(_RETRY_BACKOFF * 2 ** (retried - 1))
                    continue
                raise failure.error from exc

    @property
    def server_info(self) -> types.Implementation | None:
        """The server's name and version, once connected."""
        conn = self._conn
        return conn.client.server_info if conn is not None and conn.alive else None

    @property
    def instructions(self) -> str | None:
        """The server's instructions for using it, once connected."""
        conn = self._conn
        return conn.client.instructions if conn is not None and conn.alive else None


async def _abortable(request: Awaitable[T], abort: AbortSignal | None) -> T:
    if abort is None:
        return await request
    with anyio.CancelScope() as scope:
        remove = abort.add_callback(lambda _reason: scope.cancel())
        try:
            return await request
        finally:
            remove()
    # Only reached when the abort cancelled the scope; the SDK told the server to cancel.
    raise AbortedError(abort.reason)
