"""The output contract of ``@llm_function``: from a return annotation to a parsed value."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import TypeAdapter, ValidationError

from ..providers import ResponseFormat

__all__ = ["OutputSpec"]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_NONE_TYPES = (None, type(None))


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """How to ask for and parse one return type.

    ``kind`` is ``"text"`` (``str`` or no annotation: the reply verbatim), ``"none"`` (the reply
    is ignored) or ``"json"`` (a JSON value validated by pydantic). Non-object JSON types are
    wrapped as ``{"result": ...}`` because native structured-output modes require an object.
    """

    kind: str
    annotation: Any = None
    adapter: TypeAdapter[Any] | None = None
    schema: dict[str, Any] | None = None
    wrapped: bool = False

    @classmethod
    def for_annotation(cls, annotation: Any) -> OutputSpec:
        """Build the spec of a return annotation."""
        if annotation is inspect.Signature.empty or annotation is str:
            return cls("text")
        if annotation in _NONE_TYPES:
            return cls("none")
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        schema = adapter.json_schema()
        wrapped = schema.get("type") != "object" or get_origin(annotation) is dict
        if wrapped:
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
            if defs:
                schema["$defs"] = defs
        return cls("json", annotation, adapter, schema, wrapped)

    def response_format(self) -> ResponseFormat | None:
        """The native structured-output request, for providers with json_schema support."""
        if self.kind != "json" or self.schema is None:
            return None
        return ResponseFormat("result", self.schema)

    def contract(self) -> str:
        """The output contract for the system prompt (no native mode)."""
        if self.kind != "json":
            return ""
        shape = '{"result": <value>}' if self.wrapped else "a JSON object"
        return (
            "## Output format\nReply with only "
            f"{shape} matching this JSON schema, with no other text and no code fences:\n"
            + json.dumps(self.schema, ensure_ascii=False)
        )

    def parse(self, text: str) -> Any:
        """Parse the model's reply.

        Raises:
            ValueError: With a message the model can act on.
        """
        if self.kind == "text":
            return text
        if self.kind == "none":
            return None
        assert self.adapter is not None
        body = _strip_fence(text)
        try:
            value = json.loads(body)
        except ValueError:
            return self._validate_scalar(body)
        if self.wrapped and isinstance(value, dict) and set(value) == {"result"}:
            try:
                return self.adapter.validate_python(value["result"])
            except ValidationError as exc:
                # A dict return type may have a "result" key of its own: try the whole value.
                try:
                    return self.adapter.validate_python(value)
                except ValidationError:
                    raise ValueError(_describe(exc)) from None
        try:
            return self.adapter.validate_python(value)
        except ValidationError as exc:
            raise ValueError(_describe(exc)) from None

    def _validate_scalar(self, body: str) -> Any:
        """Accept a bare string for string-like types (``Literal``/``Enum`` of strings)."""
        assert self.adapter is not None
        if self._string_like():
            try:
                return self.adapter.validate_python(body.strip().strip('"'))
            except ValidationError as exc:
                raise ValueError(_describe(exc)) from None
        raise ValueError("the reply is not valid JSON")

    def _string_like(self) -> bool:
        args = get_args(self.annotation)
        if args and all(isinstance(a, str) for a in args):
            return True
        schema = self.schema or {}
        inner = schema.get("properties", {}).get("result", schema)
        return bool(inner.get("type") == "string")


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


def _describe(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    ]
    return "the reply does not match the schema: " + "; ".join(problems[:10])
