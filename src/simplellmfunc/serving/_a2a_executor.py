"""The A2A executor: each A2A message runs as one turn of its context's session
(:class:`ServedAgent`), and the turn's events become A2A task updates (see :mod:`._a2a`).

A turn that waits for a person sets its task ``input-required`` and is parked in its session
until the client's next message on the task answers it (:mod:`._a2a_waits`). A cancel sets the
turn's ``AbortSignal`` and waits for it to end. The executor also keeps what a shutdown needs
(:meth:`A2AExecutor.drained`, and each final update told to a :class:`~._a2a_tasks.WindDown`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from typing import Any

import anyio
from a2a.helpers import new_task, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import TaskState

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
from ..exceptions import AnswerRefusedError, InputRefusedError, SessionError
from ..runtime.config import TurnResult
from ._a2a_tasks import WindDown
from ._a2a_waits import answer_waiting, waiting_message
from ._json import WirePolicy, to_wire
from ._principals import ANONYMOUS, Principal
from ._served import ServedAgent, TurnRequest
from ._store import SessionStore
from ._waits import asked_request_id, pending_request_id

__all__ = ["A2AExecutor"]

logger = logging.getLogger("simplellmfunc.serving")

ANSWER_ARTIFACT = "answer"
_CANCEL_WAIT_SECONDS = 30.0
#: Status metadata: the event's ``to_wire`` form, long texts cut to 2,000 characters.
METADATA_POLICY = WirePolicy(max_text_chars=2_000)


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


class A2AExecutor(AgentExecutor):
    """Runs each A2A message as one turn of its context's session."""

    def __init__(self, served: ServedAgent, wind_down: WindDown) -> None:
        self._served = served
        self._wind_down = wind_down  # told of every final update enqueued
        self._running: dict[str, tuple[str, anyio.Event]] = {}
        self._parked: dict[str, str] = {}  # input-required task id -> its session
        self._calls: set[anyio.Event] = set()  # one per execute() under way

    async def drained(self) -> None:
        """Wait until every ``execute`` under way has returned (its last update enqueued):
        the running turns have been aborted by then (``ServedAgent.stop``)."""
        with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
            for call in list(self._calls):
                await call.wait()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        call = anyio.Event()
        self._calls.add(call)
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
            failed = updater.failed(updater.new_agent_message([new_text_part(text)]))
            await self._final(task_id, failed)
            return
        finally:
            del self._running[task_id]
            ended.set()
        if result is None:  # the turn waits for a person: parked until the next message
            self._parked[task_id] = session_id
            await _ask(updater, sessions.pending(session_id))
            return
        await self._final(task_id, mapper.finish(result))

    async def _final(self, task_id: str, update: Awaitable[None]) -> None:
        """Enqueue ``task_id``'s final update (``completed``, ``canceled``, ``failed``), so
        that a shutdown waits for the SDK to save it and wind the task down."""
        self._wind_down.expect(task_id)
        try:
            await update
        except BaseException:  # boundary: cleanup, re-raised: the update was not enqueued
            self._wind_down.dropped(task_id)
            raise

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        parked = self._parked.pop(context.task_id or "", None)
        if parked is not None:  # input-required: abort the waiting turn, end the task here
            if self._served.abort(parked, "canceled by the A2A client"):
                with anyio.move_on_after(_CANCEL_WAIT_SECONDS):
                    await self._served.sessions.get(parked).wait_idle()
            updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
            await self._final(context.task_id or "", updater.cancel())
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
