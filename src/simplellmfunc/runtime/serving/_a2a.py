"""A served agent as an A2A server, on the official ``a2a-sdk``.

:func:`a2a_routes` gives the Starlette routes: the agent card at the well-known path and the
JSON-RPC endpoint (message send and stream, task get and cancel) handled by the SDK's
``DefaultRequestHandler`` over an in-memory task store. Our executor runs each message as one
turn of the A2A context's session (:class:`ServedAgent`) and maps the turn's events to A2A
updates:

* the turn starts → task ``working``;
* reply text deltas → ``TaskArtifactUpdateEvent`` s of the ``answer`` artifact (appended), and
  at the end the whole answer replaces them (``last_chunk``);
* tool calls, tool results and custom events → ``working`` status updates whose metadata
  ``simplellmfunc`` holds the event (kind, tool name, call id, ...);
* the end → ``completed`` (the answer as the status message), ``canceled`` after an abort,
  ``failed`` with the error's message.

A cancel request sets the turn's ``AbortSignal`` and waits for the turn to end, so the session
keeps a valid history and the task ends ``canceled``.

Tasks belong to the principal that created them (the SDK's task store is keyed by the
request's user, which the :class:`~simplellmfunc.runtime.serving.EdgeGuard` sets): another
principal's ``tasks/get`` or ``tasks/cancel`` is "task not found", and a context id names a
session of the caller's own. Malformed JSON-RPC gets the SDK's JSON-RPC error and a one-line
log record, not a traceback.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT, TransportProtocol
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from ..._events import (
    CustomEvent,
    EventYield,
    LLMChunkArriveEvent,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallStartEvent,
)
from ...exceptions import SessionError
from ...wire import WirePolicy, to_wire
from ..config import TurnResult
from ._edge import EdgeGuard, EdgePolicy, jsonrpc_error
from ._principals import ANONYMOUS, Principal, Principals
from ._served import ServedAgent

__all__ = ["a2a_app", "a2a_routes", "agent_card"]

logger = logging.getLogger("simplellmfunc.serving")

ANSWER_ARTIFACT = "answer"
_CANCEL_WAIT_SECONDS = 30.0
#: Status metadata: the event's ``to_wire`` form, long texts cut to 2,000 characters.
METADATA_POLICY = WirePolicy(max_text_chars=2_000)


def agent_card(served: ServedAgent, url: str, *, bearer: bool = False) -> AgentCard:
    """The agent card of ``served``, reachable with JSON-RPC at ``url``.

    Args:
        served: The agent.
        url: The absolute URL of the JSON-RPC endpoint.
        bearer: Say that calls need an ``Authorization: Bearer`` token.
    """
    card = AgentCard(
        name=served.name,
        description=served.description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(
                url=url,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_CURRENT,
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=served.name,
                name=served.name,
                description=served.description,
                tags=["chat"],
            )
        ],
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


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


def _session_of(context: RequestContext) -> str:
    """The caller's session of the A2A context: a principal's contexts are its own (the SDK's
    user is the :class:`Principal` the edge set; a named one comes from a token file). ``""``
    for a context id no session can have (the turn then fails with the reason)."""
    name = context.call_context.user.user_name
    principal = Principal(name, scoped=True) if name else ANONYMOUS
    try:
        return principal.session_id(context.context_id or "")
    except SessionError:
        return ""


class _Executor(AgentExecutor):
    """Runs each A2A message as one turn of its context's session."""

    def __init__(self, served: ServedAgent) -> None:
        self._served = served
        self._running: dict[str, tuple[str, anyio.Event]] = {}

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        session_id = _session_of(context)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                new_task(
                    task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message]
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        mapper = _Mapper(updater)
        ended = anyio.Event()
        self._running[task_id] = (session_id, ended)
        try:
            result = await self._served.session_turn(
                session_id, context.get_user_input(), on_event=mapper.event
            )
        except Exception as exc:  # boundary: the A2A client learns of it as a failed task
            logger.warning("an A2A turn failed", exc_info=True)
            text = f"{type(exc).__name__}: {exc}"
            await updater.failed(updater.new_agent_message([new_text_part(text)]))
            return
        finally:
            del self._running[task_id]
            ended.set()
        await mapper.finish(result)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        running = self._running.get(context.task_id or "")
        if running is None:
            return
        session_id, ended = running
        self._served.abort(session_id, "canceled by the A2A client")
        with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
            await ended.wait()


class _Mapper:
    """Our events of one turn → A2A task updates."""

    def __init__(self, updater: TaskUpdater) -> None:
        self._updater = updater
        self._streamed = False

    async def event(self, item: EventYield) -> None:
        event = item.event
        if isinstance(event, LLMChunkArriveEvent):
            if event.text:
                await self._updater.add_artifact(
                    [new_text_part(event.text)],
                    artifact_id=ANSWER_ARTIFACT,
                    name=ANSWER_ARTIFACT,
                    append=self._streamed,
                    last_chunk=False,
                )
                self._streamed = True
            return
        if isinstance(event, ToolCallStartEvent | ToolCallEndEvent | ToolCallErrorEvent):
            await self._status(_progress_text(event), item)
        elif isinstance(event, CustomEvent):
            await self._status(event.event_name, item)

    async def _status(self, text: str, item: EventYield) -> None:
        message = self._updater.new_agent_message([new_text_part(text)])
        metadata = {"simplellmfunc": to_wire(item, METADATA_POLICY)}
        await self._updater.update_status(
            TaskState.TASK_STATE_WORKING, message=message, metadata=metadata
        )

    async def finish(self, result: TurnResult) -> None:
        updater = self._updater
        await updater.add_artifact(
            [new_text_part(result.text)],
            artifact_id=ANSWER_ARTIFACT,
            name=ANSWER_ARTIFACT,
            append=False,
            last_chunk=True,
        )
        message = updater.new_agent_message([new_text_part(result.text)])
        if result.aborted:
            await updater.cancel(message)
        elif result.terminated_by == "error":
            await updater.failed(message)
        else:
            await updater.complete(message)


def _progress_text(event: ToolCallStartEvent | ToolCallEndEvent | ToolCallErrorEvent) -> str:
    if isinstance(event, ToolCallStartEvent):
        return f"calling {event.tool_name}"
    if isinstance(event, ToolCallEndEvent):
        return f"{event.tool_name} {'done' if event.success else 'failed'}"
    return f"{event.tool_name} failed: {event.message}"


def a2a_routes(
    served: ServedAgent,
    url: str,
    *,
    rpc_path: str = "/a2a",
    bearer: bool = False,
) -> list[BaseRoute]:
    """The A2A routes of ``served``: its card at ``/.well-known/agent-card.json`` and the
    JSON-RPC endpoint at ``rpc_path``.

    Args:
        served: The agent.
        url: The server's base URL as clients reach it (``http://host:port``).
        rpc_path: Where the JSON-RPC endpoint is mounted.
        bearer: Advertise bearer-token auth in the card (the app enforces it).
    """
    card = agent_card(served, url.rstrip("/") + rpc_path, bearer=bearer)
    handler = DefaultRequestHandler(
        agent_executor=_Executor(served), task_store=InMemoryTaskStore(), agent_card=card
    )
    _quiet_sdk_client_errors()
    routes: list[BaseRoute] = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url=rpc_path),
    ]
    return routes


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
    :class:`~simplellmfunc.runtime.serving.EdgeGuard` (no token unless ``principals`` has
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
        public={"/.well-known/agent-card.json"},
    )
    routes = a2a_routes(served, url, rpc_path=rpc_path, bearer=principals.required)
    return Starlette(routes=routes, lifespan=served.lifespan, middleware=[guard])
