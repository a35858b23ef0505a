"""The OpenAI-compatible ``POST /v1/chat/completions`` of a served agent (streaming included),
and ``GET /v1/models`` / ``GET /v1/models/{id}``.

The request's messages are the turn's conversation (the endpoint is stateless, like the API it
imitates: the client sends the conversation); the agent answers with its own system prompt and
tools, plus the client's own ``tools``: those are client-side (deferred) tools. When the agent
calls one, the turn stops there: the response carries the ``tool_calls`` with
``finish_reason: "tool_calls"``, and the client's next request, carrying the ``role: "tool"``
results, continues the run (from the turn's whole history, its own tool calls included, which
the server keeps for the last 1000 such turns: :class:`PendingTurns`). ``response_format``
shapes and checks the final answer (so ``client.chat.completions.parse()`` works). What
cannot be honoured is refused in OpenAI's error shape (see :mod:`._chat_request`), never
silently ignored.

With an ``X-Session-Id`` header the server keeps the conversation instead (a session of the
agent's ``SessionStore``: its history, its kernel): only the last user message is used, or the
trailing ``role: "tool"`` results of the client's calls (a new message instead answers those
calls as cancelled).

Streamed replies carry the reply's text deltas as ``chat.completion.chunk`` s, the client tool
calls (if any), a chunk with ``finish_reason``, with ``stream_options.include_usage`` a last
chunk with ``choices: []`` and the usage, then ``data: [DONE]``. A client that disconnects
aborts the turn (a session keeps a valid history). When the agent's history window leaves part
of the client's conversation out of the model's view, the response says how many messages
(``X-History-Dropped`` header and ``history_dropped`` field; the last chunk when streaming).
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._events import EventYield, LLMCallEndEvent, LLMChunkArriveEvent
from ..engine import pending_calls
from ..exceptions import RequestRefusedError, SessionError, SimpleLLMFuncError
from ..runtime.config import TurnResult
from ._chat_request import ChatRequest, parse_chat_request, shape_error, split_turn
from ._client import ClientHook
from ._edge import principal_of
from ._edge import read_json as read_edge_json
from ._errors import ApiError, error_response, failure
from ._served import ServedAgent, TurnRequest
from ._sse import encode_sse

__all__ = [
    "DROPPED_HEADER",
    "SESSION_HEADER",
    "PendingTurns",
    "Usage",
    "chat_completions",
    "error_response",
    "model_object",
    "models",
    "read_json",
    "tool_calls",
]

#: The request header naming a server-side session (its response echoes it).
SESSION_HEADER = "X-Session-Id"
#: The response header saying how many of the client's messages the model did not see.
DROPPED_HEADER = "X-History-Dropped"

_FINISH = {"max_steps": "length", "error": "stop", "deferred": "tool_calls"}


def model_object(served: ServedAgent) -> dict[str, Any]:
    """The served agent as an OpenAI model object."""
    return {"id": served.name, "object": "model", "created": 0, "owned_by": "simplellmfunc"}


async def models(served: ServedAgent, model_id: str | None = None) -> Response:
    """``GET /v1/models`` (the one model, named after the agent) or ``GET /v1/models/{id}``."""
    if model_id is None:
        return JSONResponse({"object": "list", "data": [model_object(served)]})
    if model_id != served.name:
        message = f"The model {model_id!r} does not exist; this server serves {served.name!r}"
        return error_response(404, message, code="model_not_found", param="model")
    return JSONResponse(model_object(served))


async def read_json(request: Request) -> Any:
    """The request's JSON body, checked as the server's edge checks it (UTF-8, JSON, nesting).

    Raises:
        ApiError: For a body that is not JSON or nests too deeply.
    """
    try:
        return await read_edge_json(request)
    except RequestRefusedError as exc:
        raise ApiError(400, str(exc), code="invalid_json") from None


class Usage:
    """The token counts of one turn, summed from its model calls' end events."""

    __slots__ = ("completion_tokens", "prompt_tokens")

    def __init__(self) -> None:
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def count(self, item: EventYield) -> None:
        """Add the usage of a model call that ended."""
        if isinstance(item.event, LLMCallEndEvent):
            self.prompt_tokens += item.event.usage.prompt_tokens
            self.completion_tokens += item.event.usage.completion_tokens


async def counted_result(items: AsyncGenerator[Any, None], usage: Usage) -> TurnResult:
    """Read a turn from the door to its :class:`TurnResult`, counting its usage on the way
    (what a non-streamed chat completion and a non-streamed response both do)."""
    result: TurnResult | None = None
    async with aclosing(items) as turn:
        async for item in turn:
            if isinstance(item, TurnResult):
                result = item
            elif isinstance(item, EventYield):  # (a plain function's own items: not counted)
                usage.count(item)
    assert result is not None  # the door's last item
    return result


class _Completion(Usage):
    """The chunks and the final object of one completion."""

    __slots__ = ("created", "id", "model", "streamed")

    def __init__(self, model: str) -> None:
        super().__init__()
        self.id = f"chatcmpl-{os.urandom(8).hex()}"
        self.created = int(time.time())
        self.model = model
        self.streamed = False

    def usage(self) -> dict[str, int]:
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }

    def chunk(
        self, delta: dict[str, Any] | None, finish: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }

    def whole(self, result: TurnResult, calls: list[dict[str, Any]]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": result.text or None}
        if calls:
            message["tool_calls"] = calls
        elif message["content"] is None:
            message["content"] = ""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(result)}],
            "usage": self.usage(),
        }


def _finish(result: TurnResult) -> str:
    return _FINISH.get(result.terminated_by, "stop")


def tool_calls(result: TurnResult) -> list[dict[str, Any]]:
    """The client tool calls a deferred turn ended on, as OpenAI ``tool_calls`` entries."""
    if result.terminated_by != "deferred":
        return []
    return [call.to_dict() for call in pending_calls(result.history)]


def _results(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The trailing tool results of a request, by call id."""
    results: dict[str, Any] = {}
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        results[str(message.get("tool_call_id"))] = message.get("content")
    return results


class PendingTurns:
    """The histories of the last ``size`` turns that ended on client tool calls, by their call
    ids: a turn's own tool calls and results are not in what the client sees (its response
    carries the client's calls only), so the request that brings the client's results is
    continued from the whole history when its conversation is the one the turn had."""

    def __init__(self, size: int = 1000) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], tuple[list[Any], list[Any]]] = OrderedDict()

    def put(self, request: ChatRequest, result: TurnResult, owner: str = "") -> None:
        """Keep a deferred turn's history (and the conversation it was asked with) for
        ``owner`` (a principal's name: another principal's request never continues it)."""
        ids = tuple(c.id for c in pending_calls(result.history))
        if ids:
            self._items[(owner, *ids)] = (request.messages, result.history)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def continued(self, messages: list[dict[str, Any]], owner: str = "") -> list[dict[str, Any]]:
        """``messages`` (ending with the client's tool results) with the turn's own history
        in place of what the client saw of it, if this server kept it for ``owner``."""
        results = 0
        while results < len(messages) and messages[-1 - results].get("role") == "tool":
            results += 1
        at = len(messages) - results - 1  # the assistant message with the client's calls
        calls = messages[at].get("tool_calls") or [] if at >= 0 else []
        ids = (owner, *(str(c.get("id")) for c in calls if isinstance(c, dict)))
        kept = self._items.get(ids)
        if kept is None or messages[: len(kept[0])] != kept[0] or at != len(kept[0]):
            return messages
        self._items.move_to_end(ids)
        return [*kept[1], *messages[at + 1 :]]


class _Turn:
    """One request's turn: the session's, or the client's conversation's."""

    def __init__(self, request: ChatRequest, session_id: str | None, owner: str) -> None:
        self.request = request
        self.session_id = session_id
        self.owner = owner
        self.hook = ClientHook(request.client)

    async def items(self, served: ServedAgent, pending: PendingTurns) -> AsyncGenerator[Any, None]:
        """The turn through the one door (:meth:`ServedAgent.turn`): its events, then its
        :class:`TurnResult`."""
        request = self.request
        if self.session_id is not None:
            results = None if request.text is not None else _results(request.messages)
            asked = TurnRequest(
                request.text,
                self.session_id,
                hooks=(self.hook,),
                results=results,
                principal=self.owner,
            )
        else:
            text, history = split_turn(request.messages)
            if text is None:
                history = pending.continued(history, self.owner)
            asked = TurnRequest(text, history=history, hooks=(self.hook,), principal=self.owner)
        async with aclosing(served.turn(asked)) as items:
            async for item in items:
                if (
                    isinstance(item, TurnResult)
                    and item.terminated_by == "deferred"
                    and self.session_id is None
                ):
                    pending.put(request, item, self.owner)
                yield item

    def shape_error(self, result: TurnResult) -> ApiError | None:
        """The error of a final answer that still misses ``response_format``."""
        return shape_error(self.request.client.shape, result, "response_format")

    def dropped(self) -> int:
        return self.hook.dropped or 0


async def _checked(
    served: ServedAgent, request: Request
) -> tuple[ChatRequest, str | None, str | None]:
    """The request, its session id as sent and as stored (a principal's session ids are its
    own: "s1" of alice is alice.s1), refused (``ApiError``) if we cannot honour it."""
    chat = parse_chat_request(await read_json(request), served.name)
    session_id = request.headers.get(SESSION_HEADER)
    scoped: str | None = None
    if session_id is not None:
        try:
            scoped = principal_of(request).session_id(session_id)
        except SessionError as exc:
            raise ApiError(400, str(exc), param=SESSION_HEADER) from None
        if chat.text is None and not chat.continues:
            raise ApiError(
                400,
                f"with {SESSION_HEADER} the last message must be plain user text, or the "
                "results of the client's tool calls (the server keeps the conversation)",
                param="messages",
            )
    if chat.client.tools and not served.client_tools:
        raise ApiError(
            400, "this agent does not take client tools", param="tools", code="tools_refused"
        )
    if chat.images and not await served.takes_images():
        raise ApiError(
            400,
            "this agent's model does not take images",
            param="messages",
            code="image_not_supported",
        )
    return chat, session_id, scoped


async def chat_completions(
    served: ServedAgent, request: Request, pending: PendingTurns | None = None
) -> Response:
    """``POST /v1/chat/completions``; with an ``X-Session-Id`` header the server keeps the
    session's history (only the request's last user message is used)."""
    try:
        chat, session_id, scoped = await _checked(served, request)
    except ApiError as exc:
        return exc.response()
    turn = _Turn(chat, scoped, principal_of(request).name)
    pending = pending if pending is not None else PendingTurns()
    completion = _Completion(served.name)
    headers = {SESSION_HEADER: session_id} if session_id is not None else {}
    if chat.stream:
        try:
            served.admit(scoped, turn.owner)  # a refusal gets its HTTP status, not an error chunk
        except SimpleLLMFuncError as exc:
            return failure(exc).response()
        return StreamingResponse(
            _stream(served, turn, completion, pending),
            media_type="text/event-stream",
            headers=headers,
        )

    try:
        result = await counted_result(turn.items(served, pending), completion)
    except SimpleLLMFuncError as exc:
        return failure(exc).response()
    problem = turn.shape_error(result)
    if problem is not None:
        return problem.response()
    body = completion.whole(result, tool_calls(result))
    if turn.dropped():
        headers[DROPPED_HEADER] = str(turn.dropped())
        body["history_dropped"] = turn.dropped()
    return JSONResponse(body, headers=headers)


async def _stream(
    served: ServedAgent, turn: _Turn, completion: _Completion, pending: PendingTurns
) -> AsyncIterator[str]:
    """The turn's items as chunks, in this task: no stream or callback in between. Leaving
    early (the client disconnected) closes the door's iterator: the session store then ends
    the turn like an abort, and the session keeps a valid history."""
    # A shaped answer is checked before it is sent: its deltas are held back.
    hold = turn.request.client.shape is not None
    result: TurnResult | None = None
    try:
        async with aclosing(turn.items(served, pending)) as items:
            async for item in items:
                if isinstance(item, TurnResult):
                    result = item
                    continue
                if not isinstance(item, EventYield):
                    continue  # a plain function's own items: its answer comes as the result
                completion.count(item)
                event = item.event
                if hold or not isinstance(event, LLMChunkArriveEvent):
                    continue
                if event.text and not item.origin.agent:
                    delta = _delta(completion, {"content": event.text})
                    yield encode_sse(completion.chunk(delta))
    except SimpleLLMFuncError as exc:
        yield encode_sse(failure(exc).body())
        yield encode_sse("[DONE]")
        return
    assert result is not None  # the door's last item
    for chunk in _final_chunks(turn, completion, result):
        yield encode_sse(chunk)
    yield encode_sse("[DONE]")


def _final_chunks(turn: _Turn, completion: _Completion, result: TurnResult) -> list[Any]:
    """What follows a turn's streamed text: the shape error, or the held or unstreamed text,
    the client's calls, the finish chunk and the usage."""
    problem = turn.shape_error(result)
    if problem is not None:
        return [problem.body()]
    chunks: list[Any] = []
    if not completion.streamed and result.text:
        chunks.append(completion.chunk(_delta(completion, {"content": result.text})))
    chunks.extend(_call_chunks(completion, tool_calls(result)))
    extra: dict[str, Any] = {}
    if turn.dropped():
        extra["history_dropped"] = turn.dropped()
    if not turn.request.include_usage:
        chunks.append(completion.chunk({}, _finish(result), **extra))
        return chunks
    chunks.append(completion.chunk({}, _finish(result)))
    chunks.append(completion.chunk(None, usage=completion.usage(), **extra))
    return chunks


def _delta(completion: _Completion, delta: dict[str, Any]) -> dict[str, Any]:
    if not completion.streamed:
        delta = {"role": "assistant", **delta}
    completion.streamed = True
    return delta


def _call_chunks(completion: _Completion, calls: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The client tool calls as stream deltas: one chunk per call, whole."""
    chunks = []
    for index, call in enumerate(calls):
        entry = {"index": index, **call}
        chunks.append(completion.chunk(_delta(completion, {"tool_calls": [entry]})))
    return chunks
