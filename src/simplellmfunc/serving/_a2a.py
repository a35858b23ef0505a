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
agent itself as one ``chat`` skill when it has neither.

Our executor runs each message as one
turn of the A2A context's session (:class:`ServedAgent`) and maps the turn's events to A2A
updates:

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
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.jsonrpc_models import InvalidParamsError
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from a2a.utils.constants import (
    AGENT_CARD_WELL_KNOWN_PATH,
    PROTOCOL_VERSION_0_3,
    PROTOCOL_VERSION_CURRENT,
    TransportProtocol,
)
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from .._events import (
    CustomEvent,
    EventYield,
    LLMChunkArriveEvent,
    ReactEndEvent,
    ResponseYield,
    ToolCallEndEvent,
    ToolCallErrorEvent,
    ToolCallStartEvent,
)
from ..decorators import ChatAgent
from ..exceptions import AnswerRefusedError, InputRefusedError, SessionError
from ..runtime.config import ConfiguredAgent, TurnResult
from ..runtime.skills import Skills
from ..tools import Tool
from ._a2a_waits import answer_waiting, waiting_message
from ._edge import EdgeGuard, EdgePolicy, jsonrpc_error
from ._json import WirePolicy, to_wire
from ._principals import ANONYMOUS, Principal, Principals
from ._served import ServedAgent, TurnRequest
from ._store import SessionStore
from ._waits import asked_request_id, pending_request_id

__all__ = ["a2a_app", "a2a_routes", "agent_card", "agent_skills"]

logger = logging.getLogger("simplellmfunc.serving")

ANSWER_ARTIFACT = "answer"
#: Where clients before 0.3 read the card (``agent-card.json`` is the current path).
LEGACY_CARD_PATH = "/.well-known/agent.json"
_CANCEL_WAIT_SECONDS = 30.0
_WIND_DOWN_SECONDS = 5.0  # how long a shutdown waits for the SDK to end an ended task's tasks
_STATES: frozenset[str | int] = frozenset([*TaskState.keys(), *TaskState.values()])
#: Status metadata: the event's ``to_wire`` form, long texts cut to 2,000 characters.
METADATA_POLICY = WirePolicy(max_text_chars=2_000)


def agent_card(
    served: ServedAgent,
    url: str,
    *,
    bearer: bool = False,
    skills: list[AgentSkill] | None = None,
) -> AgentCard:
    """The agent card of ``served``, reachable with JSON-RPC at ``url`` (1.0 and 0.3).

    Args:
        served: The agent.
        url: The absolute URL of the JSON-RPC endpoint.
        bearer: Say that calls need an ``Authorization: Bearer`` token.
        skills: The card's skills (default: the agent itself as one ``chat`` skill; see
            :func:`agent_skills` for the agent's real ones).
    """
    card = AgentCard(
        name=served.name,
        description=served.description,
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=TransportProtocol.JSONRPC, protocol_version=v)
            for v in (PROTOCOL_VERSION_CURRENT, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills if skills else [_chat_skill(served)],
    )
    if bearer:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer"))
        )
        card.security_requirements.append(
            SecurityRequirement(schemes={"bearer": StringList(list=[])})
        )
    return card


def _chat_skill(served: ServedAgent) -> AgentSkill:
    return AgentSkill(
        id=served.name, name=served.name, description=served.description, tags=["chat"]
    )


async def agent_skills(served: ServedAgent) -> list[AgentSkill]:
    """The skills of ``served``'s card: one per skill of its toolkit's :class:`Skills`
    (tag ``skill``) and one per other tool (tag ``tool``), in toolkit order; the agent itself
    as one ``chat`` skill when it has none.

    An ``@llm_chat`` agent's toolkit is what a call would run with (its tool providers, MCP
    servers included, are asked); a ``ConfiguredAgent``'s is the one it opened.
    """
    agent = served.agent
    if isinstance(agent, ConfiguredAgent):
        items: list[Any] = list(agent.toolkit)
        tools = [t for i in items if not isinstance(i, Skills) for t in await _tools_of(i)]
    elif isinstance(agent, ChatAgent):
        invocation, _ = await agent.prepare("")
        items = [h for h in invocation.hooks if isinstance(h, Skills)]
        tools = list(invocation.tools)
    else:  # a SessionAgent: nothing to list but the chat itself
        items, tools = [], []
    found: list[AgentSkill] = []
    plumbing: set[str] = set()
    for skills in (i for i in items if isinstance(i, Skills)):
        plumbing.update(t.name for t in skills.toolset)
        found += [
            AgentSkill(id=s.name, name=s.name, description=s.description, tags=["skill"])
            for s in skills.registry
        ]
    found += [
        AgentSkill(id=t.name, name=t.name, description=t.description or t.name, tags=["tool"])
        for t in tools
        if t.name not in plumbing
    ]
    unique = {skill.id: skill for skill in reversed(found)}  # the first of one id wins
    return [unique[key] for key in dict.fromkeys(s.id for s in found)] or [_chat_skill(served)]


async def _tools_of(item: Any) -> list[Tool]:
    """The tools of one toolkit item of a config agent (a tool, or a provider's tools)."""
    if isinstance(item, Tool):
        return [item]
    list_tools = getattr(item, "list_tools", None)
    return list(await list_tools()) if list_tools is not None else []


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
        self._parked: dict[str, str] = {}  # input-required task id -> its session
        self._calls: set[anyio.Event] = set()  # one per execute() under way
        self.task_ids: set[str] = set()  # the tasks executed (until the SDK is done with them)

    @property
    def parked_ids(self) -> set[str]:
        """The tasks waiting for the client's answer (``input-required``)."""
        return set(self._parked)

    async def drained(self) -> None:
        """Wait until every ``execute`` under way has returned (its last update enqueued):
        the running turns have been aborted by then (``ServedAgent.stop``)."""
        with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
            for call in list(self._calls):
                await call.wait()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        call = anyio.Event()
        self._calls.add(call)
        self.task_ids.add(context.task_id or "")
        try:
            await self._execute(context, event_queue)
        finally:
            self._calls.discard(call)
            call.set()

    async def _execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        session_id = _session_of(context)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                new_task(
                    task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=[context.message]
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        sessions = self._served.sessions
        parked = self._parked.pop(task_id, None) == session_id and session_id in sessions
        if parked and sessions.get(session_id).parked is not None:
            # The task is input-required: this message answers what the turn waits for.
            try:
                answer_waiting(sessions.get(session_id), context.get_user_input())
            except (AnswerRefusedError, InputRefusedError) as exc:
                self._parked[task_id] = session_id
                await _ask(updater, sessions.pending(session_id), f"{exc}. ")
                return
            items: AsyncIterator[Any] = sessions.follow(session_id)
        else:
            user = context.call_context.user.user_name if context.call_context else ""
            asked = TurnRequest(context.get_user_input(), session_id, principal=user or "")
            items = self._served.turn(asked)
        await updater.start_work()
        mapper = _Mapper(updater)
        ended = anyio.Event()
        self._running[task_id] = (session_id, ended)
        try:
            result = await _drive(items, mapper, sessions, session_id)
        except Exception as exc:  # boundary: the A2A client learns of it as a failed task
            logger.warning("an A2A turn failed", exc_info=True)
            text = f"{type(exc).__name__}: {exc}"
            await updater.failed(updater.new_agent_message([new_text_part(text)]))
            return
        finally:
            del self._running[task_id]
            ended.set()
        if result is None:  # the turn waits for a person: parked until the next message
            self._parked[task_id] = session_id
            await _ask(updater, sessions.pending(session_id))
            return
        await mapper.finish(result)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        parked = self._parked.pop(context.task_id or "", None)
        if parked is not None:  # input-required: abort the waiting turn, end the task here
            if self._served.abort(parked, "canceled by the A2A client"):
                with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
                    await self._served.sessions.get(parked).wait_idle()
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await updater.cancel()
            return
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


async def _drive(
    items: AsyncIterator[Any], mapper: _Mapper, sessions: SessionStore, session_id: str
) -> TurnResult | None:
    """Map a turn's items to task updates: how it ended, or ``None`` once it waits for a
    person (leaving the items then parks the turn in its session). ``items`` is the door's
    (events, then the :class:`TurnResult`) or, for a turn followed after an answer, the
    session's (events, then the ``ResponseYield``)."""
    text: Any = ""
    history: list[dict[str, Any]] | None = None
    ended = "answer"
    async with aclosing(items) as turn:  # type: ignore[type-var]
        async for item in turn:
            if isinstance(item, EventYield):
                if isinstance(item.event, ReactEndEvent):
                    ended = item.event.terminated_by
                await mapper.event(item)
                asked = asked_request_id(item)
                waiting = {pending_request_id(w) for w in sessions.pending(session_id)}
                if asked is not None and asked in waiting:
                    return None
            elif isinstance(item, TurnResult):
                return item
            elif isinstance(item, ResponseYield):
                text, history = item.response, list(item.messages)
    if history is None:
        history = await sessions.history(session_id)
    return TurnResult(str(text), history, ended)


async def _ask(updater: TaskUpdater, waits: list[dict[str, Any]], before: str = "") -> None:
    """Set the task ``input-required``: what is asked in the message, the requests (wire
    form) in the metadata."""
    message = updater.new_agent_message([new_text_part(before + waiting_message(waits))])
    metadata = {"simplellmfunc": {"waiting": waits}}
    await updater.update_status(
        TaskState.TASK_STATE_INPUT_REQUIRED, message=message, metadata=metadata
    )


def _progress_text(event: ToolCallStartEvent | ToolCallEndEvent | ToolCallErrorEvent) -> str:
    if isinstance(event, ToolCallStartEvent):
        return f"calling {event.tool_name}"
    if isinstance(event, ToolCallEndEvent):
        return f"{event.tool_name} {'done' if event.success else 'failed'}"
    return f"{event.tool_name} failed: {event.message}"


def card_paths(rpc_path: str = "/a2a") -> frozenset[str]:
    """Every path the agent card is served at (no token needed: it is how clients find out
    how to call): both well-known names, of the server and of ``rpc_path``."""
    names = (AGENT_CARD_WELL_KNOWN_PATH, LEGACY_CARD_PATH)
    return frozenset(names) | {rpc_path.rstrip("/") + name for name in names}


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
    skills = _SkillsOnce(served)

    async def with_skills(served_card: AgentCard) -> AgentCard:
        filled = AgentCard()
        filled.CopyFrom(served_card)
        del filled.skills[:]
        filled.skills.extend(await skills.get())
        return filled

    executor = _Executor(served)
    handler = _Handler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
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
    waits for our executions' last updates and for the ended tasks' wind-down, then lets the
    SDK force the waiting ones, so that none is left pending at event-loop shutdown (where
    asyncio destroys it and the SDK's queues warn of lost events).
    """

    async def aclose(self) -> None:
        executor = self.agent_executor
        assert isinstance(executor, _Executor)
        await executor.drained()
        registry = self._active_task_registry  # (the SDK's; read with its public get())
        with anyio.move_on_after(_WIND_DOWN_SECONDS):
            while True:
                live = [t for t in executor.task_ids if await registry.get(t) is not None]
                executor.task_ids.intersection_update(live)
                if not executor.task_ids - executor.parked_ids:
                    break
                await anyio.sleep(0.01)
        await super().aclose()

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        page: ListTasksResponse = await super().on_list_tasks(params, context)
        page.page_size = len(page.tasks)
        return page


class _SkillsOnce:
    """The agent's skills, read at the first card request (the toolkit is open by then)."""

    def __init__(self, served: ServedAgent) -> None:
        self._served = served
        self._lock = anyio.Lock()
        self._skills: list[AgentSkill] | None = None

    async def get(self) -> list[AgentSkill]:
        async with self._lock:
            if self._skills is None:
                try:
                    self._skills = await agent_skills(self._served)
                except Exception:  # boundary: a toolkit that cannot be listed (an MCP server
                    # down ...) must not take the card down: the agent is its one skill
                    logger.warning("the agent's skills cannot be listed", exc_info=True)
                    return [_chat_skill(self._served)]
            return self._skills


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
