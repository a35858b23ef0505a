"""The OpenAI-compatible ``POST /v1/chat/completions`` of a served agent (streaming included).

The request's last user message is the turn's input and the messages before it its history
(the endpoint is stateless, like the API it imitates: the client sends the conversation); the
agent answers with its own system prompt and tools. With an ``X-Session-Id`` header the server
keeps the conversation instead (a session of the agent's ``SessionStore``: its history, its
kernel): only the last user message is used, and the earlier ones are ignored. Streamed
replies carry the reply's text deltas as ``chat.completion.chunk`` s, a last chunk with
``finish_reason`` and usage, then ``data: [DONE]``. A client that disconnects aborts the turn
(a session keeps a valid history).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._events import EventYield, LLMCallEndEvent, LLMChunkArriveEvent
from .._messages import dict_content_text
from ..exceptions import CapacityError, SessionError, SimpleLLMFuncError
from ..runtime.config import TurnResult
from ..runtime.serving import OnEvent, ServedAgent, principal_of, read_json
from ..wire import encode_sse

__all__ = ["SESSION_HEADER", "chat_completions", "error_response", "models"]

#: The request header naming a server-side session (its response echoes it).
SESSION_HEADER = "X-Session-Id"

_FINISH = {"max_steps": "length", "error": "stop"}


def error_response(status: int, message: str, kind: str = "invalid_request_error") -> Response:
    """An error in the OpenAI shape."""
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


def _capacity_status(error: CapacityError) -> int:
    return 503 if error.limit == "closing" else 429


async def models(served: ServedAgent) -> Response:
    """``GET /v1/models``: the one model, named after the agent."""
    model = {"id": served.name, "object": "model", "created": 0, "owned_by": "simplellmfunc"}
    return JSONResponse({"object": "list", "data": [model]})


def _split(body: Any) -> tuple[str, list[dict[str, Any]]]:
    """The last user message's text and the history before it.

    Raises:
        ValueError: If the body has no ``messages`` ending with a user message.
    """
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        raise ValueError("'messages' must be a non-empty list of messages")
    last = messages[-1]
    if last.get("role") != "user":
        raise ValueError("the last message must be the user's")
    history = [dict(m) for m in messages[:-1] if isinstance(m, dict)]
    return dict_content_text(last.get("content")), history


class _Completion:
    """The chunks and the final object of one completion."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{os.urandom(8).hex()}"
        self.created = int(time.time())
        self.model = model
        self.streamed = False
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def count(self, item: EventYield) -> None:
        if isinstance(item.event, LLMCallEndEvent):
            self.prompt_tokens += item.event.usage.prompt_tokens
            self.completion_tokens += item.event.usage.completion_tokens

    def usage(self) -> dict[str, int]:
        total = self.prompt_tokens + self.completion_tokens
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": total,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if finish is not None:
            chunk["usage"] = self.usage()
        return chunk

    def whole(self, result: TurnResult) -> dict[str, Any]:
        message = {"role": "assistant", "content": result.text}
        finish = _FINISH.get(result.terminated_by, "stop")
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self.usage(),
        }


class _Turn:
    """What one request asks: the text, and either a session id or the client's history."""

    def __init__(self, text: str, history: list[dict[str, Any]], session_id: str | None) -> None:
        self.text = text
        self.history = history
        self.session_id = session_id

    async def run(self, served: ServedAgent, on_event: OnEvent) -> TurnResult:
        if self.session_id is not None:
            return await served.session_turn(self.session_id, self.text, on_event=on_event)
        return await served.run_turn(self.text, self.history, on_event=on_event)


def _failure(exc: SimpleLLMFuncError) -> tuple[int, str, str]:
    """The HTTP status, message and OpenAI error type of a refused or failed turn."""
    if isinstance(exc, CapacityError):
        return _capacity_status(exc), str(exc), "rate_limit_error"
    if isinstance(exc, SessionError):
        return 409, str(exc), "invalid_request_error"
    return 502, f"{type(exc).__name__}: {exc}", "server_error"


async def chat_completions(served: ServedAgent, request: Request) -> Response:
    """``POST /v1/chat/completions``; with an ``X-Session-Id`` header the server keeps the
    session's history (only the request's last user message is used)."""
    try:
        body = await read_json(request)
        text, history = _split(body)
        session_id = request.headers.get(SESSION_HEADER)
        # A principal's session ids are its own (a token file): "s1" of alice is alice.s1.
        scoped = principal_of(request).session_id(session_id) if session_id is not None else None
    except (ValueError, SessionError) as exc:
        return error_response(400, str(exc))
    turn = _Turn(text, history, scoped)
    completion = _Completion(served.name)
    headers = {SESSION_HEADER: session_id} if session_id is not None else None
    if body.get("stream"):
        try:
            served.admit(scoped)  # a refusal gets its HTTP status, not an error chunk
        except SimpleLLMFuncError as exc:
            status, message, kind = _failure(exc)
            return error_response(status, message, kind)
        return StreamingResponse(
            _stream(served, turn, completion), media_type="text/event-stream", headers=headers
        )

    async def on_event(item: EventYield) -> None:
        completion.count(item)

    try:
        result = await turn.run(served, on_event)
    except SimpleLLMFuncError as exc:
        status, message, kind = _failure(exc)
        return error_response(status, message, kind)
    return JSONResponse(completion.whole(result), headers=headers)


async def _stream(served: ServedAgent, turn: _Turn, completion: _Completion) -> AsyncIterator[str]:
    send, receive = anyio.create_memory_object_stream[dict[str, Any]](64)

    async def on_event(item: EventYield) -> None:
        completion.count(item)
        event = item.event
        if isinstance(event, LLMChunkArriveEvent) and event.text and not item.origin.agent:
            delta = {"content": event.text}
            if not completion.streamed:
                delta["role"] = "assistant"
            completion.streamed = True
            await send.send(completion.chunk(delta))

    async def produce() -> None:
        async with send:
            try:
                result = await turn.run(served, on_event)
            except SimpleLLMFuncError as exc:
                _, message, kind = _failure(exc)
                await send.send({"error": {"message": message, "type": kind}})
                return
            if not completion.streamed and result.text:
                await send.send(completion.chunk({"role": "assistant", "content": result.text}))
            finish = _FINISH.get(result.terminated_by, "stop")
            await send.send(completion.chunk({}, finish))

    # Leaving early (the client disconnected) cancels produce(): the session store then ends
    # the turn like an abort, and the session keeps a valid history.
    async with anyio.create_task_group() as group:
        group.start_soon(produce)
        async with receive:
            async for chunk in receive:
                yield encode_sse(chunk)
        yield encode_sse("[DONE]")
