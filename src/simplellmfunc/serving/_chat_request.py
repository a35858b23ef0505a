"""A ``/v1/chat/completions`` request, read and checked: every field we accept is honoured,
every field we cannot honour is refused (400), none is silently ignored.

* ``model`` must name the served agent (else 404 ``model_not_found``; left out: the agent);
* ``messages``: the client's conversation (system / developer messages are left out: the agent
  answers with its own system prompt); it must end with a user message or with the results of
  the client's tool calls, and be a valid history;
* ``tools`` / ``tool_choice``: the client's own tools (deferred: the agent may call them and the
  response hands the calls over); ``tool_choice`` naming one function is refused;
* ``response_format``: ``text``, ``json_object`` or ``json_schema`` (the answer is shaped and
  checked);
* ``n``: 1 only; ``stream`` and ``stream_options.include_usage``;
* ``image_url`` parts only when the agent's model takes images.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._messages import history_from_dicts, history_to_dicts
from ..engine import DeferredTool
from ..exceptions import SimpleLLMFuncError
from ..runtime.config import TurnResult
from ._client import AnswerShape, ClientTurn, answer_problem
from ._errors import ApiError

__all__ = [
    "ChatRequest",
    "answer_shape",
    "check_model",
    "client_tools",
    "has_image",
    "parse_chat_request",
    "shape_error",
    "split_turn",
]

_DROPPED_ROLES = frozenset({"system", "developer"})
_CHOICES = frozenset({"auto", "none", "required"})


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """What one chat-completions request asks.

    Attributes:
        messages: The conversation (chat dicts, system messages left out), valid.
        text: The last user message's text when it is plain text (else ``None``: the turn
            continues ``messages`` as they are).
        client: The client's tools, tool choice and answer shape.
        stream: Stream the reply.
        include_usage: Send the usage in a last chunk with ``choices: []``.
        images: The conversation has image parts.
    """

    messages: list[dict[str, Any]]
    text: str | None
    client: ClientTurn
    stream: bool
    include_usage: bool
    images: bool

    @property
    def continues(self) -> bool:
        """Whether the request ends with tool results (the client ran its tools)."""
        return bool(self.messages) and self.messages[-1].get("role") == "tool"


def check_model(body: Mapping[str, Any], served_name: str) -> None:
    """Refuse a model other than the served agent (404 ``model_not_found``; no model: the
    served agent, for clients written by hand).

    Raises:
        ApiError: As said.
    """
    model = body.get("model", served_name)
    if not isinstance(model, str):
        raise ApiError(400, "'model' must be the served agent's name", param="model")
    if model != served_name:
        raise ApiError(
            404,
            f"The model {model!r} does not exist; this server serves {served_name!r}",
            param="model",
            code="model_not_found",
        )


def parse_chat_request(body: Any, served_name: str) -> ChatRequest:
    """Read and check a chat-completions body.

    Raises:
        ApiError: For anything we would otherwise have to ignore or could not run.
    """
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    check_model(body, served_name)
    n = body.get("n")
    if n is not None and n != 1:
        raise ApiError(
            400, "only n=1 is supported: send n requests", param="n", code="unsupported_value"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list of messages", param="messages")
    if not all(isinstance(m, dict) for m in messages):
        raise ApiError(400, "every message must be an object", param="messages")
    kept = [dict(m) for m in messages if m.get("role") not in _DROPPED_ROLES]
    if not kept:
        raise ApiError(400, "'messages' needs a user message", param="messages")
    last = kept[-1]
    if last.get("role") not in ("user", "tool"):
        raise ApiError(
            400, "the last message must be the user's, or tool results", param="messages"
        )
    try:
        typed = history_from_dicts(kept)
    except SimpleLLMFuncError as exc:
        raise ApiError(400, str(exc), param="messages", code="invalid_history") from None
    normal = history_to_dicts(typed)
    content = last.get("content")
    text = content if last.get("role") == "user" and isinstance(content, str) else None
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    return ChatRequest(
        normal,
        text,
        client_turn(body),
        body.get("stream") is True,
        include_usage,
        any(has_image(m) for m in normal),
    )


def has_image(message: Mapping[str, Any]) -> bool:
    """Whether a chat message has an ``image_url`` part."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "image_url" for p in content
    )


def split_turn(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """The turn's text and history: the last message's text when it is plain user text, else
    ``None`` and the whole conversation (continued as it is: images, tool results)."""
    last = messages[-1]
    content = last.get("content")
    if last.get("role") == "user" and isinstance(content, str):
        return content, messages[:-1]
    return None, messages


def shape_error(shape: AnswerShape | None, result: TurnResult, param: str) -> ApiError | None:
    """The error of a final answer that still misses the requested shape (after the repair
    the run gave the model); ``None`` when it fits, or nothing was asked."""
    if shape is None or result.terminated_by == "deferred":
        return None
    problem = answer_problem(shape, result.text)
    if problem is None:
        return None
    message = f"the agent's answer does not match {param}: {problem}"
    return ApiError(500, message, "server_error", param, "invalid_answer")


def client_turn(body: Mapping[str, Any]) -> ClientTurn:
    """The ``tools``, ``tool_choice`` and ``response_format`` of a chat-completions body.

    Raises:
        ApiError: For a malformed tool, a ``tool_choice`` we cannot honour, a bad format.
    """
    tools = client_tools(body.get("tools"), nested=True)
    choice = body.get("tool_choice", "auto")
    if isinstance(choice, dict):
        raise ApiError(
            400,
            "a tool_choice naming one function is not supported: use 'auto', 'none' or 'required'",
            param="tool_choice",
            code="unsupported_value",
        )
    if choice not in _CHOICES:
        raise ApiError(400, f"unknown tool_choice {choice!r}", param="tool_choice")
    return ClientTurn(tools, choice, _shape(body.get("response_format")))


def client_tools(raw: Any, *, nested: bool) -> tuple[DeferredTool, ...]:
    """The client's function tools (``nested``: chat's ``{"function": {...}}`` form, else the
    Responses API's flat form).

    Raises:
        ApiError: For anything but a list of well-formed function tools.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ApiError(400, "'tools' must be a list", param="tools")
    tools: list[DeferredTool] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("type") != "function":
            raise ApiError(400, f"tools[{index}]: only function tools are supported", param="tools")
        spec = item.get("function") if nested else item
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ApiError(400, f"tools[{index}]: a function needs a name", param="tools")
        parameters = spec.get("parameters") or {"type": "object", "properties": {}}
        description = spec.get("description") or ""
        if not isinstance(parameters, dict) or not isinstance(description, str):
            raise ApiError(400, f"tools[{index}]: malformed function", param="tools")
        try:
            tools.append(DeferredTool(spec["name"], description, parameters))
        except SimpleLLMFuncError as exc:
            raise ApiError(400, f"tools[{index}]: {exc}", param="tools") from None
    if len({t.name for t in tools}) != len(tools):
        raise ApiError(400, "two tools have the same name", param="tools")
    return tuple(tools)


def _shape(raw: Any) -> AnswerShape | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return AnswerShape()
    if kind != "json_schema":
        raise ApiError(400, f"unsupported response_format {kind!r}", param="response_format")
    spec = raw.get("json_schema")
    if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
        raise ApiError(400, "json_schema needs a 'schema' object", param="response_format")
    return answer_shape(spec.get("name") or "answer", spec["schema"], spec.get("strict") is True)


def answer_shape(name: Any, schema: dict[str, Any], strict: bool) -> AnswerShape:
    """A checked answer shape.

    Raises:
        ApiError: For an invalid JSON schema.
    """
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        message = f"invalid JSON schema: {exc.message}"
        raise ApiError(400, message, param="response_format") from None
    return AnswerShape(str(name), schema, strict)
