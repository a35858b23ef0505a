"""A served agent as an A2A server, on the official ``a2a-sdk``.

:func:`a2a_routes` gives the Starlette routes: the agent card at both well-known paths
(``/.well-known/agent-card.json``, and ``/.well-known/agent.json`` that older clients read) and
the JSON-RPC endpoint (message send and stream, task get, list and cancel) handled by the SDK's
``DefaultRequestHandler`` over an in-memory task store.

Both protocol versions the SDK speaks are served on the one endpoint: the current one (1.0:
``SendMessage`` ..., with an ``A2A-Version: 1.0`` header) and 0.3 (``message/send`` ..., the
SDK's compatibility adapter). A request without an ``A2A-Version`` header is a 0.3 request, as
the specification reads it. The card names the endpoint twice (a 1.0 and a 0.3 interface) and
carries the 0.3 card's top-level fields (``url``, ``protocolVersion``, ``preferredTransport``),
so that clients of either version can read it. Its skills are the agent's own: one per tool
and per skill of its toolkit (read from the agent when the card is first asked for), or the
agent itself as one ``chat`` skill when it has neither (:mod:`._a2a_card`).

Our executor (:mod:`._a2a_executor`) runs each message as one turn of the A2A context's session
(:class:`ServedAgent`) and maps the turn's events to A2A updates:

* the turn starts → task ``working``;
* reply text deltas → ``TaskArtifactUpdateEvent`` s of the ``answer`` artifact (appended), and
  at the end the whole answer replaces them (``last_chunk``);
* tool calls, tool results and custom events → ``working`` status updates whose metadata
  ``simplellmfunc`` holds the event (kind, tool name, call id, ...);
* the end → ``completed`` (the answer as the status message), ``canceled`` after an abort,
  ``failed`` with the error's message;
* a wait for a person (a tool approval, a PyRepl ``input()``) → ``input-required``: the turn is
  parked in its session and the client's next message on the task answers it (see
  :mod:`._a2a_waits`), then the same task goes on.

A cancel request sets the turn's ``AbortSignal`` and waits for the turn to end, so the session
keeps a valid history and the task ends ``canceled``.

Tasks belong to the principal that created them (the SDK's task store is keyed by the
request's user, which the :class:`~simplellmfunc.serving.EdgeGuard` sets): another
principal's ``tasks/get`` or ``tasks/cancel`` is "task not found", and a context id names a
session of the caller's own. Malformed JSON-RPC gets the SDK's JSON-RPC error and a one-line
log record, not a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anyio
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.jsonrpc_models import InvalidParamsError
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.types import (
    AgentCard,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import UnsupportedOperationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ._a2a_card import SkillsOnce, agent_card, agent_skills, card_paths
from ._a2a_executor import A2AExecutor
from ._a2a_tasks import FINAL_STATES, WatchedTaskStore, WindDown
from ._edge import EdgeGuard, EdgePolicy, jsonrpc_error
from ._principals import Principals
from ._served import ServedAgent

__all__ = ["a2a_app", "a2a_routes", "agent_card", "agent_skills"]

logger = logging.getLogger("simplellmfunc.serving")

_WIND_DOWN_SECONDS = 5.0  # how long a shutdown waits for the SDK to end an ended task's tasks
_STATES: frozenset[str | int] = frozenset([*TaskState.keys(), *TaskState.values()])


#: What the SDK's JSON-RPC dispatcher logs with a traceback for a client's malformed request.
_CLIENT_ERRORS = frozenset(
    {"Failed to validate base JSON-RPC request", "Failed to parse request params"}
)


class _NoClientTracebacks(logging.Filter):
    """Drops the SDK's traceback records of malformed client requests: its next record (a
    one-line warning with the JSON-RPC error) says it all, and a client must not be able to
    fill the server log with tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg not in _CLIENT_ERRORS


def _quiet_sdk_client_errors() -> None:
    sdk = logging.getLogger("a2a.server.routes.jsonrpc_dispatcher")
    if not any(isinstance(f, _NoClientTracebacks) for f in sdk.filters):
        sdk.addFilter(_NoClientTracebacks())


def a2a_routes(
    served: ServedAgent,
    url: str,
    *,
    rpc_path: str = "/a2a",
    bearer: bool = False,
) -> list[BaseRoute]:
    """The A2A routes of ``served``: its card at ``/.well-known/agent-card.json`` and
    ``/.well-known/agent.json`` (of the server, and of ``rpc_path`` for clients that take the
    endpoint for the agent's base URL), and the JSON-RPC endpoint (1.0 and 0.3) at
    ``rpc_path``.

    Args:
        served: The agent.
        url: The server's base URL as clients reach it (``http://host:port``).
        rpc_path: Where the JSON-RPC endpoint is mounted.
        bearer: Advertise bearer-token auth in the card (the app enforces it).
    """
    card = agent_card(served, url.rstrip("/") + rpc_path, bearer=bearer)
    skills = SkillsOnce(served)

    async def with_skills(served_card: AgentCard) -> AgentCard:
        filled = AgentCard()
        filled.CopyFrom(served_card)
        del filled.skills[:]
        filled.skills.extend(await skills.get())
        return filled

    wind_down = WindDown()
    handler = _Handler(A2AExecutor(served, wind_down), wind_down, card)
    served.on_close(handler.aclose)
    _quiet_sdk_client_errors()
    dispatcher = JsonRpcDispatcher(request_handler=handler, enable_v0_3_compat=True)

    async def rpc(request: Request) -> Response:
        return await _refused_params(request) or await dispatcher.handle_requests(request)

    routes: list[BaseRoute] = [
        route
        for path in card_paths(rpc_path)
        for route in create_agent_card_routes(card, with_skills, card_url=path)
    ]
    routes.append(Route(rpc_path, endpoint=rpc, methods=["POST"]))
    return routes


async def _refused_params(request: Request) -> Response | None:
    """A JSON-RPC error for parameters the SDK would silently drop, else ``None``.

    The SDK parses parameters ignoring unknown enum values, so ``ListTasks`` with an unknown
    ``status`` would list every task: it is an invalid parameter (-32602). Bodies that are not
    JSON-RPC are left to the SDK's dispatcher (it reads the body Starlette has cached).
    """
    try:
        body = await request.json()
    except ValueError:
        return None
    if not isinstance(body, dict) or body.get("method") != "ListTasks":
        return None
    params = body.get("params")
    status = params.get("status") if isinstance(params, dict) else None
    known = isinstance(status, str | int) and not isinstance(status, bool) and status in _STATES
    if status is None or known:
        return None
    request_id = body.get("id")
    error = InvalidParamsError(message=f"unknown task state {status!r} in params.status")
    valid_id = request_id if isinstance(request_id, str | int) else None
    return JSONResponse(build_error_response(valid_id, error))


class _Handler(DefaultRequestHandler):
    """The SDK's handler; a ``ListTasks`` page says how many tasks it holds (``pageSize``),
    not how many were asked for (the TCK's reading of "the page size used for this
    response": 0 for an empty page, the total on a last page).

    The SDK runs each task in background tasks of its own (producer, consumer, queue
    dispatchers) that outlive the request: a task left ``input-required`` keeps them (also
    when its streaming client disconnected), and a task that just ended winds them down over
    a few loop turns. :meth:`aclose` (the served agent's, once its running turns are aborted)
    waits for our executions' last updates, then for the SDK to save each final state and
    wind its task down (our :class:`~._a2a_tasks.WindDown` bookkeeping), then lets the SDK
    force the waiting ones (its public ``aclose``), so that none is left pending at
    event-loop shutdown (where asyncio destroys it and the SDK's queues warn of lost events).
    """

    def __init__(self, executor: A2AExecutor, wind_down: WindDown, card: AgentCard) -> None:
        store = WatchedTaskStore(wind_down)
        super().__init__(agent_executor=executor, task_store=store, agent_card=card)
        self._executor = executor
        self._wind_down = wind_down
        self._store = store

    async def aclose(self) -> None:
        await self._executor.drained()
        with anyio.move_on_after(_WIND_DOWN_SECONDS):
            await self._wind_down.settle()
        await super().aclose()

    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Message | Task:
        await self._refuse_ended(params, context)
        reply: Message | Task = await super().on_message_send(params, context)
        return reply

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        await self._refuse_ended(params, context)
        async with aclosing(super().on_message_send_stream(params, context)) as events:
            async for event in events:
                yield event

    async def _refuse_ended(self, params: SendMessageRequest, context: ServerCallContext) -> None:
        """Refuse a message naming a task that has ended, as the SDK would, but before it
        makes that task's queues anew: it does not close them when it refuses, and their
        dispatcher tasks would stay pending until the garbage collector destroys them."""
        task_id = params.message.task_id
        task = await self._store.get(task_id, context) if task_id else None
        if task is not None and task.status.state in FINAL_STATES:
            state = TaskState.Name(task.status.state)
            raise UnsupportedOperationError(message=f"Task {task_id} is in terminal state: {state}")

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        page.page_size = len(page.tasks)
        return page


def a2a_app(
    agent: Any,
    url: str,
    *,
    rpc_path: str = "/a2a",
    principals: Principals | None = None,
    edge: EdgePolicy | None = None,
    **served_options: Any,
) -> Starlette:
    """A Starlette app serving ``agent`` over A2A, behind an
    :class:`~simplellmfunc.serving.EdgeGuard` (no token unless ``principals`` has
    some; or use ``simplellmfunc serve``).

    Args:
        agent: An ``@llm_chat`` agent, an open ``ConfiguredAgent`` or a :class:`ServedAgent`.
        url: The base URL clients reach the app at (it goes into the agent card).
        rpc_path: Where the JSON-RPC endpoint is mounted.
        principals: The tokens accepted, each a principal whose tasks are its own (default:
            none needed).
        edge: The hosts, origins and body limits requests must pass (default: loopback).
        **served_options: :class:`ServedAgent` options (``name``, ``max_sessions`` ...).

    The app opens the served agent for its lifetime (:meth:`ServedAgent.lifespan`); on
    shutdown the running turns are aborted and awaited.
    """
    served = agent if isinstance(agent, ServedAgent) else ServedAgent(agent, **served_options)

    principals = principals or Principals.open()
    guard = Middleware(
        EdgeGuard,
        policy=edge,
        principals=principals,
        default_shape=jsonrpc_error,
        public=card_paths(rpc_path),
    )
    routes = a2a_routes(served, url, rpc_path=rpc_path, bearer=principals.required)
    return Starlette(routes=routes, lifespan=served.lifespan, middleware=[guard])
