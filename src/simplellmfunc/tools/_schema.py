"""JSON schemas and argument validation for tools, generated with pydantic from signatures."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from .._abort import AbortSignal
from ..exceptions import ToolDefinitionError
from ._docstring import parse_docstring
from ._emitter import ToolEventEmitter

__all__ = ["ArgumentsError", "SignatureSchema", "build_signature_schema"]

#: Parameter names the framework fills in; they never reach the model.
INJECTED_NAMES = frozenset({"event_emitter", "abort_signal", "_abort_signal", "context", "self"})


class ArgumentsError(ValueError):
    """Arguments from the model do not match the tool's schema; the message is model-readable."""


@dataclass(frozen=True, slots=True)
class SignatureSchema:
    """The model-facing parameters of a callable, and how to validate arguments for it."""

    description: str
    parameters: dict[str, Any]
    model: type[BaseModel]
    injected: Mapping[str, str]
    accepts_var_kwargs: bool

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Validate and coerce model arguments into keyword arguments.

        Raises:
            ArgumentsError: Naming every problem, in words the model can act on.
        """
        try:
            parsed = self.model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ArgumentsError(_describe(exc)) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(problems)


def _injection_kind(name: str, annotation: Any) -> str | None:
    """Return what the framework injects for this parameter, or None for a model parameter."""
    from ._tool import ToolContext

    base = get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
    candidates = {base, *get_args(base)}
    if name == "event_emitter" or ToolEventEmitter in candidates:
        return "event_emitter"
    if name in ("abort_signal", "_abort_signal") or AbortSignal in candidates:
        return "abort_signal"
    if ToolContext in candidates or name == "context":
        return "context"
    return None


def build_signature_schema(func: Callable[..., Any], name: str) -> SignatureSchema:
    """Build the schema of ``func``'s parameters.

    Raises:
        ToolDefinitionError: For positional-only or ``*args`` parameters, or a type pydantic
            cannot express as JSON schema.
    """
    doc = parse_docstring(inspect.getdoc(func))
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # boundary: unresolvable annotations are the user's to fix
        raise ToolDefinitionError(f"tool {name!r}: cannot resolve annotations: {exc}") from exc
    fields: dict[str, Any] = {}
    injected: dict[str, str] = {}
    var_kwargs = False
    for param in inspect.signature(func).parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_kwargs = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(f"tool {name!r}: parameter {param.name!r} must be nameable")
        annotation = hints.get(param.name, Any)
        kind = _injection_kind(param.name, annotation)
        if kind is not None or param.name == "self":
            if kind is not None:
                injected[param.name] = kind
            continue
        fields[param.name] = _field(param, annotation, doc.args.get(param.name))
    model = _create_model(name, fields)
    return SignatureSchema(doc.description, _json_schema(model, name), model, injected, var_kwargs)


def _field(param: inspect.Parameter, annotation: Any, described: str | None) -> Any:
    default: Any = ... if param.default is param.empty else param.default
    if isinstance(default, FieldInfo):
        return (annotation, default)
    info = Field(default=default, description=described) if described else Field(default=default)
    return (annotation, info)


def _create_model(name: str, fields: dict[str, Any]) -> type[BaseModel]:
    config = ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        return create_model(f"{name}_arguments", __config__=config, **fields)
    except Exception as exc:  # boundary: pydantic rejects the user's annotation
        raise ToolDefinitionError(f"tool {name!r}: unsupported parameter type: {exc}") from exc


def _json_schema(model: type[BaseModel], name: str) -> dict[str, Any]:
    try:
        schema = model.model_json_schema()
    except Exception as exc:  # boundary: a type without a JSON schema
        raise ToolDefinitionError(f"tool {name!r}: no JSON schema for a parameter: {exc}") from exc
    schema.pop("title", None)
    schema.pop("additionalProperties", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema
