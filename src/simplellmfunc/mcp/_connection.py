"""One live MCP session, owned by a supervisor task that opens, holds and ends it."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from anyio.abc import TaskStatus
from mcp import Client
from mcp.client.session import LoggingFnT, MessageHandlerFnT
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from ._config import HttpSpec, ServerSpec, StdioSpec, secret_values
from ._errors import UNKNOWN_SESSION, StartFailure, describe
from ._process import ServerOutput, open_stdio

__all__ = ["Connection", "ListKind", "Options", "SessionWatch", "supervise"]

logger = logging.getLogger("simplellmfunc.mcp")

ListKind = Literal["tools", "prompts", "resources"]
OnChanged = Callable[[ListKind], None]

_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
_LISTEN_FAILURES = 3
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
}


@dataclass(frozen=True, slots=True)
class Options:
    """How to open a session."""

    label: str
    connect_timeout: float
    mode: str
    client_info: types.Implementation


class SessionWatch:
    """Notices an HTTP server rejecting our session id (it restarted, or expired the session).

    The SDK reports some of those rejections only as "Server returned an error response", so
    the HTTP client's response hook reads the (small) error body itself.
    """

    __slots__ = ("rejected",)

    def __init__(self) -> None:
        self.rejected = False

    async def on_response(self, response: httpx2.Response) -> None:
        """``httpx2`` response hook."""
        if (
            response.status_code not in (400, 404)
            or "mcp-session-id" not in response.request.headers
        ):
            return
        body = await response.aread()
        if UNKNOWN_SESSION.search(body[:2000].decode("utf-8", "replace")):
            self.rejected = True


class Connection:
    """An entered ``mcp.Client``; ``done`` is set when it is lost or closed."""

    __slots__ = ("client", "done", "ended", "watch")

    def __init__(
        self, client: Client, done: anyio.Event, ended: anyio.Event, watch: SessionWatch
    ) -> None:
        self.client = client
        self.done = done
        self.ended = ended
        self.watch = watch

    @property
    def alive(self) -> bool:
        """Whether calls may still use this session."""
        return not self.done.is_set()

    def close(self) -> None:
        """Ask the supervisor to end the session (it stops a stdio server)."""
        self.done.set()


async def supervise(
    spec: ServerSpec,
    options: Options,
    on_changed: OnChanged,
    *,
    task_status: TaskStatus[Connection],
) -> None:
    """Open a session, report it through ``task_status`` and hold it until it is done.

    Failures before the session is up propagate to the ``TaskGroup.start`` caller, as a
    :class:`StartFailure` that says how a stdio server ended; later ones only end this session
    (the next call opens a new one).
    """
    done, ended = anyio.Event(), anyio.Event()
    watch = SessionWatch()
    output = ServerOutput(secret_values(spec)) if isinstance(spec, StdioSpec) else None
    started = False
    try:
        # The deadline covers the handshake only; the scope must outlive it, since the
        # session's task groups are entered inside it.
        with anyio.CancelScope(deadline=anyio.current_time() + options.connect_timeout) as scope:
            async with Client(
                _transport(spec, options.label, done, watch, output),
                mode=options.mode,
                cache=None,
                client_info=options.client_info,
                message_handler=_message_handler(on_changed),
                logging_callback=_logging_callback(options.label),
            ) as client:
                scope.deadline = math.inf
                async with anyio.create_task_group() as group:
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        group.start_soon(_listen, client, on_changed, options.label)
                    started = True
                    task_status.started(Connection(client, done, ended, watch))
                    await done.wait()
                    group.cancel_scope.cancel()
        if not started:
            raise TimeoutError("connect timed out")
    except Exception as exc:  # boundary: a broken session must not take the toolset down
        if not started:
            # The stdio transport has been left: the server's exit and stderr are known.
            if output is None:
                raise StartFailure(exc) from exc
            raise StartFailure(exc, output.exit_code, output.stderr_tail) from exc
        logger.warning("MCP server %s: session ended: %s", options.label, describe(exc))
    finally:
        done.set()
        ended.set()


def _transport(
    spec: ServerSpec,
    label: str,
    lost: anyio.Event,
    watch: SessionWatch,
    output: ServerOutput | None,
) -> AbstractAsyncContextManager[Any]:
    if isinstance(spec, StdioSpec):
        return open_stdio(spec, label, lost, output)
    if spec.transport == "sse":
        return sse_client(spec.url, headers=dict(spec.headers), auth=spec.auth)
    return _streamable_http(spec, watch)


@asynccontextmanager
async def _streamable_http(spec: HttpSpec, watch: SessionWatch) -> AsyncIterator[Any]:
    client = httpx2.AsyncClient(
        headers=dict(spec.headers),
        auth=spec.auth,
        timeout=_HTTP_TIMEOUT,
        event_hooks={"response": [watch.on_response]},
    )
    async with client, streamable_http_client(spec.url, http_client=client) as streams:
        yield streams


def _message_handler(on_changed: OnChanged) -> MessageHandlerFnT:
    async def handle(message: object) -> None:
        match message:
            case types.ToolListChangedNotification():
                on_changed("tools")
            case types.PromptListChangedNotification():
                on_changed("prompts")
            case types.ResourceListChangedNotification():
                on_changed("resources")
            case _:
                pass  # progress goes to the call's callback; bad lines were logged already

    return handle


def _logging_callback(label: str) -> LoggingFnT:
    async def log(params: types.LoggingMessageNotificationParams) -> None:
        level = _LOG_LEVELS.get(params.level, logging.ERROR)
        logger.log(level, "[%s] %s: %s", label, params.logger or "server", params.data)

    return log


async def _listen(client: Client, on_changed: OnChanged, label: str) -> None:
    """Follow list changes on a 2026-era session (they only arrive on a listen stream)."""
    caps = client.server_capabilities
    tools = bool(caps.tools and caps.tools.list_changed)
    prompts = bool(caps.prompts and caps.prompts.list_changed)
    resources = bool(caps.resources and caps.resources.list_changed)
    if not (tools or prompts or resources):
        return
    failures = 0
    while failures < _LISTEN_FAILURES:
        try:
            async with client.listen(
                tools_list_changed=tools,
                prompts_list_changed=prompts,
                resources_list_changed=resources,
            ) as subscription:
                failures = 0
                async for event in subscription:
                    on_changed(_event_kind(event))
            return  # the server closed the stream gracefully
        except Exception as exc:  # boundary: change events are an optimisation, never fatal
            failures += 1
            logger.debug("MCP server %s: listen stream failed: %s", label, describe(exc))
            # Events may have been missed while the stream was down.
            for kind in ("tools", "prompts", "resources"):
                on_changed(kind)
            await anyio.sleep(0.5 * failures)


def _event_kind(event: ServerEvent) -> ListKind:
    if isinstance(event, PromptsListChanged):
        return "prompts"
    if isinstance(event, ResourcesListChanged | ResourceUpdated):
        return "resources"
    return "tools"
