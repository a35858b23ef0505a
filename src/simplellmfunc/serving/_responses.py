"""The OpenAI Responses API (``POST /v1/responses``) of a served agent, through the same turn
as chat completions.

* ``input``: a string, or a list of items: messages (``input_text`` / ``input_image`` /
  ``output_text`` parts), ``function_call`` and ``function_call_output`` items;
* ``previous_response_id``: the conversation continues from a response this server gave
  (kept in memory, the last :data:`KEPT_RESPONSES`; an unknown id is 404). ``store: false``
  keeps none;
* ``tools`` (function tools), ``tool_choice``, ``text.format`` (``json_schema`` /
  ``json_object``) as in chat completions: the client's tools are client-side (deferred), the
  response's ``output`` then has ``function_call`` items, and the next request's
  ``function_call_output`` items continue the run;
* ``stream``: the Responses SSE events (``response.created``, ``response.in_progress``,
  ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta`` / ``.done``, ``response.content_part.done``,
  ``response.output_item.done``, ``response.completed``; ``response.failed`` on a failure).

``instructions`` and system / developer messages are left out, as in chat completions: the
agent answers with its own system prompt.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._events import EventYield, LLMChunkArriveEvent
from .._messages import history_from_dicts, history_to_dicts
from ..engine import pending_calls
from ..exceptions import SimpleLLMFuncError
from ..runtime.config import TurnResult
from ._chat_request import (
    answer_shape,
    check_model,
    client_tools,
    has_image,
    shape_error,
    split_turn,
)
from ._client import AnswerShape, ClientHook, ClientTurn
from ._edge import principal_of
from ._errors import ApiError, failure
from ._openai import Usage, counted_result, read_json
from ._served import ServedAgent, TurnRequest
from ._sse import encode_sse

__all__ = ["KEPT_RESPONSES", "ResponseLog", "create_response"]

#: How many responses' conversations the server keeps for ``previous_response_id``.
KEPT_RESPONSES = 1000


class ResponseLog:
    """The conversations of the last ``size`` responses, by response id (in memory), each
    its principal's: another principal's response id is not found."""

    def __init__(self, size: int = KEPT_RESPONSES) -> None:
        self.size = size
        self._items: OrderedDict[str, tuple[str, list[dict[str, Any]]]] = OrderedDict()

    def get(self, response_id: str, owner: str = "") -> list[dict[str, Any]] | None:
        """A copy of the conversation after ``response_id``, if it is ``owner``'s."""
        kept = self._items.get(response_id)
        if kept is None or kept[0] != owner:
            return None
        self._items.move_to_end(response_id)
        return [dict(m) for m in kept[1]]

    def put(self, response_id: str, history: list[dict[str, Any]], owner: str = "") -> None:
        """Keep the conversation after ``response_id`` for ``owner`` (a principal's name; the
        oldest goes beyond ``size``)."""
        self._items[response_id] = (owner, history)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Request:
    messages: list[dict[str, Any]]
    client: ClientTurn
    stream: bool
    store: bool
    previous: str | None
    owner: str  # the principal's name: its responses are its own


def _text_of(parts: Any, index: int) -> str | list[dict[str, Any]]:
    """A message's content in chat form (input_text / output_text / input_image parts)."""
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        raise ApiError(400, f"input[{index}]: content must be a string or parts", param="input")
    out: list[dict[str, Any]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
            out.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            out.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise ApiError(400, f"input[{index}]: unsupported part {kind!r}", param="input")
    if all(p["type"] == "text" for p in out):
        return "".join(p["text"] for p in out)
    return out


def _messages(raw: Any) -> list[dict[str, Any]]:
    """The ``input`` items as chat messages.

    Raises:
        ApiError: For an item we cannot read.
    """
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    if not isinstance(raw, list) or not raw:
        raise ApiError(400, "'input' must be a string or a non-empty list", param="input")
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise ApiError(400, f"input[{index}] must be an object", param="input")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                continue
            if role not in ("user", "assistant"):
                raise ApiError(400, f"input[{index}]: unknown role {role!r}", param="input")
            messages.append({"role": role, "content": _text_of(item.get("content"), index)})
        elif kind == "function_call":
            call = {
                "id": str(item.get("call_id", "")),
                "type": "function",
                "function": {
                    "name": str(item.get("name", "")),
                    "arguments": str(item.get("arguments", "{}")),
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "content" not in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, str) else _text_of(output, index)
            messages.append(
                {"role": "tool", "tool_call_id": str(item.get("call_id", "")), "content": content}
            )
        else:
            raise ApiError(400, f"input[{index}]: unsupported item {kind!r}", param="input")
    return messages


def _shape(text: Any) -> AnswerShape | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if fmt is None:
        return None
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return AnswerShape()
    if kind == "json_schema" and isinstance(fmt.get("schema"), dict):
        return answer_shape(fmt.get("name") or "answer", fmt["schema"], fmt.get("strict") is True)
    raise ApiError(400, f"unsupported text.format {kind!r}", param="text.format")


def _parse(body: Any, served: ServedAgent, log: ResponseLog, owner: str) -> _Request:
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    check_model(body, served.name)
    previous = body.get("previous_response_id")
    history: list[dict[str, Any]] = []
    if previous is not None:
        kept = log.get(previous, owner) if isinstance(previous, str) else None
        if kept is None:
            raise ApiError(
                404,
                f"Previous response with id {previous!r} not found.",
                param="previous_response_id",
                code="previous_response_not_found",
            )
        history = kept
    choice = body.get("tool_choice", "auto")
    if choice not in ("auto", "none", "required"):
        raise ApiError(
            400,
            "tool_choice must be 'auto', 'none' or 'required'",
            param="tool_choice",
            code="unsupported_value",
        )
    tools = client_tools(body.get("tools"), nested=False)
    if tools and not served.client_tools:
        raise ApiError(400, "this agent does not take client tools", param="tools")
    messages = [*history, *_messages(body.get("input"))]
    if not messages or messages[-1]["role"] not in ("user", "tool"):
        raise ApiError(400, "the input must end with a user message or tool outputs")
    try:
        messages = history_to_dicts(history_from_dicts(messages))
    except SimpleLLMFuncError as exc:
        raise ApiError(400, str(exc), param="input", code="invalid_input") from None
    client = ClientTurn(tools, choice, _shape(body.get("text")))
    return _Request(
        messages,
        client,
        body.get("stream") is True,
        body.get("store") is not False,
        previous,
        owner,
    )


class _Response(Usage):
    """One response object, built up as the turn runs."""

    __slots__ = ("created", "id", "message_id", "model", "request", "sequence")

    def __init__(self, model: str, request: _Request) -> None:
        super().__init__()
        self.id = f"resp_{os.urandom(12).hex()}"
        self.message_id = f"msg_{os.urandom(12).hex()}"
        self.created = int(time.time())
        self.model = model
        self.request = request
        self.sequence = 0

    def message(self, text: str, status: str = "completed") -> dict[str, Any]:
        content = [] if status == "in_progress" else [_output_text(text)]
        return {
            "type": "message",
            "id": self.message_id,
            "status": status,
            "role": "assistant",
            "content": content,
        }

    def output(self, result: TurnResult) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if result.text:
            items.append(self.message(result.text))
        if result.terminated_by == "deferred":
            for call in pending_calls(result.history):
                items.append(
                    {
                        "type": "function_call",
                        "id": f"fc_{call.id}",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                        "status": "completed",
                    }
                )
        return items

    def whole(
        self,
        status: str,
        output: list[dict[str, Any]],
        error: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        tools = [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "strict": False,
            }
            for t in self.request.client.tools
        ]
        usage = None
        if status != "in_progress":
            usage = {
                "input_tokens": self.prompt_tokens,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": self.completion_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.prompt_tokens + self.completion_tokens,
            }
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": self.request.client.tool_choice,
            "tools": tools,
            "previous_response_id": self.request.previous,
            "error": dict(error) if error is not None else None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "text": {"format": {"type": "text"}},
            "usage": usage,
        }

    def event(self, kind: str, **fields: Any) -> str:
        data = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return encode_sse(data, event=kind)


def _output_text(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": []}


class _Turn:
    def __init__(self, request: _Request) -> None:
        self.request = request
        self.hook = ClientHook(request.client)

    def items(self, served: ServedAgent) -> AsyncGenerator[Any, None]:
        """The turn through the one door (:meth:`ServedAgent.turn`), stateless."""
        text, history = split_turn(self.request.messages)
        owner = self.request.owner
        return served.turn(TurnRequest(text, history=history, hooks=(self.hook,), principal=owner))

    def problem(self, result: TurnResult) -> ApiError | None:
        return shape_error(self.request.client.shape, result, "text.format")


async def create_response(served: ServedAgent, log: ResponseLog, request: Request) -> Response:
    """``POST /v1/responses``."""
    try:
        parsed = _parse(await read_json(request), served, log, principal_of(request).name)
        if any(has_image(m) for m in parsed.messages) and not await served.takes_images():
            raise ApiError(400, "this agent's model does not take images", param="input")
    except ApiError as exc:
        return exc.response()
    response = _Response(served.name, parsed)
    turn = _Turn(parsed)
    if parsed.stream:
        try:
            served.admit(None, parsed.owner)
        except SimpleLLMFuncError as exc:
            return failure(exc).response()
        return StreamingResponse(
            _stream(served, log, turn, response), media_type="text/event-stream"
        )

    try:
        result = await counted_result(turn.items(served), response)
    except SimpleLLMFuncError as exc:
        return failure(exc).response()
    problem = turn.problem(result)
    if problem is not None:
        return problem.response()
    if parsed.store:
        log.put(response.id, result.history, turn.request.owner)
    return JSONResponse(response.whole("completed", response.output(result)))


async def _stream(
    served: ServedAgent, log: ResponseLog, turn: _Turn, response: _Response
) -> AsyncIterator[str]:
    hold = turn.request.client.shape is not None
    opened = False
    parts: list[str] = []

    def open_message() -> list[str]:
        nonlocal opened
        if opened:
            return []
        opened = True
        item = response.message("", "in_progress")
        return [
            response.event("response.output_item.added", output_index=0, item=item),
            response.event(
                "response.content_part.added",
                item_id=response.message_id,
                output_index=0,
                content_index=0,
                part=_output_text(""),
            ),
        ]

    def text_delta(text: str) -> list[str]:
        events = open_message()
        parts.append(text)
        events.append(
            response.event(
                "response.output_text.delta",
                item_id=response.message_id,
                output_index=0,
                content_index=0,
                delta=text,
                logprobs=[],
            )
        )
        return events

    def fail(error: ApiError) -> str:
        failed = response.whole("failed", [], {"code": error.code, "message": error.message})
        return response.event("response.failed", response=failed)

    start = response.whole("in_progress", [])
    yield response.event("response.created", response=start)
    yield response.event("response.in_progress", response=start)
    result: TurnResult | None = None
    try:
        async with aclosing(turn.items(served)) as items:
            async for item in items:
                if isinstance(item, TurnResult):
                    result = item
                    continue
                if not isinstance(item, EventYield):
                    continue  # a plain function's own items: its answer comes as the result
                response.count(item)
                event = item.event
                if hold or not isinstance(event, LLMChunkArriveEvent):
                    continue
                if event.text and not item.origin.agent:
                    for chunk in text_delta(event.text):
                        yield chunk
    except SimpleLLMFuncError as exc:
        yield fail(failure(exc))
        return
    assert result is not None  # the door's last item
    problem = turn.problem(result)
    if problem is not None:
        yield fail(problem)
        return
    if not parts and result.text:
        for chunk in text_delta(result.text):
            yield chunk
    output = response.output(result)
    if opened:
        text = "".join(parts)
        ids = {"item_id": response.message_id, "output_index": 0, "content_index": 0}
        yield (response.event("response.output_text.done", text=text, logprobs=[], **ids))
        yield (response.event("response.content_part.done", part=_output_text(text), **ids))
        message = response.message(text)
        yield (response.event("response.output_item.done", output_index=0, item=message))
        output = [message, *(o for o in output if o["type"] != "message")]
    for index, entry in enumerate(output):
        if entry["type"] != "function_call":
            continue
        for kind in ("response.output_item.added", "response.output_item.done"):
            yield response.event(kind, output_index=index, item=entry)
    if turn.request.store:
        log.put(response.id, result.history, turn.request.owner)
    whole = response.whole("completed", output)
    yield response.event("response.completed", response=whole)
