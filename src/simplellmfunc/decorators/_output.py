"""The output contract of ``@llm_function``: from a return annotation to a parsed value."""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from ..providers import ResponseFormat

__all__ = ["OutputSpec", "PartialParser"]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)
_OPEN_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n")
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


class PartialParser:
    """The value a reply cut short validates to so far, for ``LLMFunction.stream``.

    The text is read as partial JSON (``pydantic_core.from_json(..., allow_partial=
    "trailing-strings")``: unclosed containers closed, an unfinished string kept as far as it
    goes) and validated with ``experimental_allow_partial`` (an unfinished last list item or
    dict entry is left out). A text that does not validate yet (a model still missing a
    required field) yields nothing; :meth:`feed` says whether :attr:`value` changed.
    """

    __slots__ = ("_output", "_seen", "value")

    def __init__(self, output: OutputSpec) -> None:
        self._output = output
        self._seen = False
        self.value: Any = None

    def feed(self, text: str) -> bool:
        """Parse ``text`` (the reply so far); return whether it gave a new value."""
        output = self._output
        if output.kind == "none":
            return False
        if output.kind == "text":
            value: Any = text
        else:
            value = self._json(text)
            if value is _NOTHING:
                return False
        if self._seen and value == self.value:
            return False
        self._seen, self.value = True, value
        return True

    def _json(self, text: str) -> Any:
        output = self._output
        assert output.adapter is not None
        body = _OPEN_FENCE.sub("", text, count=1).rstrip().removesuffix("```")
        if not body.strip():
            return _NOTHING
        try:
            raw = from_json(body, allow_partial="trailing-strings")
        except ValueError:
            return _NOTHING
        if output.wrapped:
            if not isinstance(raw, dict) or "result" not in raw:
                return _NOTHING
            raw = raw["result"]
        try:
            return output.adapter.validate_python(raw, experimental_allow_partial=True)
        except ValidationError:
            return _NOTHING


_NOTHING = object()


def _strip_fence(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


def _describe(exc: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}"
        for e in exc.errors(include_url=False)
    ]
    return "the reply does not match the schema: " + "; ".join(problems[:10])
