"""JSON schemas and argument validation for tools, generated with pydantic from signatures."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from .._abort import AbortSignal
from ..exceptions import ToolDefinitionError, UserError
from ._docstring import ParsedDocstring, parse_docstring
from ._emitter import ToolContext, ToolEventEmitter

__all__ = ["ArgumentsError", "SignatureSchema", "build_schema", "build_signature_schema"]


class ArgumentsError(UserError, ValueError):
    """Arguments do not match the tool's schema; the message is model-readable."""


@dataclass(frozen=True, slots=True)
class SignatureSchema:
    """The model-facing parameters of a callable, and how to validate arguments for it.

    Attributes:
        description: The docstring description (text before the first section).
        parameters: The JSON schema of the model-facing parameters.
        model: The pydantic model that validates arguments.
        injected: Framework-filled parameter name → ``event_emitter`` / ``abort_signal`` /
            ``context``.
        accepts_var_kwargs: Whether the callable takes ``**kwargs`` (extra arguments pass).
        fields: Field name in :attr:`model` → the parameter name it fills.
    """

    description: str
    parameters: dict[str, Any]
    model: type[BaseModel]
    injected: Mapping[str, str]
    accepts_var_kwargs: bool
    fields: Mapping[str, str]

    def validate(self, arguments: Mapping[str, object]) -> dict[str, Any]:
        """Validate and coerce model arguments into keyword arguments.

        Raises:
            ArgumentsError: Naming every problem, in words the model can act on.
        """
        if not isinstance(arguments, Mapping):
            kind = type(arguments).__name__
            raise ArgumentsError(f"invalid arguments: expected a JSON object, got {kind}")
        if not arguments and not self.fields:
            return {}  # no parameters, none given: nothing the model could reject
        try:
            parsed = self.model.model_validate(dict(arguments))
        except ValidationError as exc:
            raise ArgumentsError(_describe(exc)) from None
        kwargs = {param: getattr(parsed, field) for field, param in self.fields.items()}
        kwargs.update(parsed.model_extra or {})
        return kwargs


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        problems.append(f"{where}: {err['msg']}")
    return "invalid arguments: " + "; ".join(problems)


def _unwrap_annotated(annotation: object) -> tuple[object, tuple[object, ...]]:
    if get_origin(annotation) is Annotated:
        base, *metadata = get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()


def _injection_kind(name: str, annotation: object) -> str | None:
    """Return what the framework injects for this parameter, or None for a model parameter."""
    base, _ = _unwrap_annotated(annotation)
    # A tuple, not a set: annotation arguments (Literal values, metadata) need not be hashable.
    candidates = (base, *get_args(base))
    if name == "event_emitter" or any(c is ToolEventEmitter for c in candidates):
        return "event_emitter"
    if name in ("abort_signal", "_abort_signal") or any(c is AbortSignal for c in candidates):
        return "abort_signal"
    # ``context`` is injected by name only when untyped: ``context: str`` is the model's.
    if any(c is ToolContext for c in candidates) or (name == "context" and base is Any):
        return "context"
    return None


def _type_hints(func: Callable[..., object]) -> dict[str, object]:
    """Resolved annotations of a function, method, ``functools.partial`` or callable object."""
    target: object = func
    while isinstance(target, functools.partial):
        target = target.func
    if not (inspect.isfunction(target) or inspect.ismethod(target)) and callable(target):
        target = type(target).__call__
    return typing.get_type_hints(target, include_extras=True)


def build_signature_schema(func: Callable[..., object], name: str) -> SignatureSchema:
    """Build the schema of ``func``'s parameters.

    Raises:
        ToolDefinitionError: For positional-only or ``*args`` parameters, or a type pydantic
            cannot express as JSON schema.
    """
    return build_schema(func, name, parse_docstring(getattr(func, "__doc__", None)))


def build_schema(func: Callable[..., object], name: str, doc: ParsedDocstring) -> SignatureSchema:
    """Build the schema of ``func``'s parameters, documented by ``doc``.

    Raises:
        ToolDefinitionError: For positional-only or ``*args`` parameters, or a type pydantic
            cannot express as JSON schema.
    """
    try:
        hints = _type_hints(func)
        signature = inspect.signature(func)
    except Exception as exc:  # boundary: unresolvable annotations are the user's to fix
        raise ToolDefinitionError(f"tool {name!r}: cannot resolve annotations: {exc}") from exc
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    injected: dict[str, str] = {}
    var_kwargs = False
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            var_kwargs = True
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(f"tool {name!r}: parameter {param.name!r} must be nameable")
        annotation = hints.get(param.name, Any)
        kind = _injection_kind(param.name, annotation)
        if kind is not None:
            injected[param.name] = kind
        elif param.name != "self":
            # Internal field names never clash with BaseModel attributes (``json``, ``copy``,
            # ``model_config``) or pydantic's private ``_names``; the alias is what models see.
            field_name = f"p{len(fields)}"
            fields[field_name] = _field(param, annotation, doc.args.get(param.name))
            names[field_name] = param.name
    model = _create_model(name, fields, var_kwargs)
    parameters = _json_schema(model, name)
    return SignatureSchema(doc.description, parameters, model, injected, var_kwargs, names)


def _field(
    param: inspect.Parameter, annotation: Any, described: str | None
) -> tuple[object, FieldInfo]:
    """Return the ``(annotation, FieldInfo)`` pair of one model-facing parameter."""
    _, metadata = _unwrap_annotated(annotation)
    declared = [m for m in metadata if isinstance(m, FieldInfo)]
    default: Any = ... if param.default is param.empty else param.default
    if isinstance(default, FieldInfo):
        declared.append(default)
    # An explicit Field(description=...) / Field(alias=...) beats the docstring and the name.
    if any(info.description for info in declared):
        described = None
    alias = next((info.alias for info in reversed(declared) if info.alias), param.name)
    options: dict[str, Any] = {"alias": alias}
    if described:
        options["description"] = described
    typed = Annotated[annotation, Field(**options)]
    return (typed, default if isinstance(default, FieldInfo) else Field(default=default))


def _create_model(name: str, fields: dict[str, Any], var_kwargs: bool) -> type[BaseModel]:
    config = ConfigDict(
        extra="allow" if var_kwargs else "forbid",
        arbitrary_types_allowed=False,
        # Models often send 42 for a string parameter; accept it rather than fail the call.
        coerce_numbers_to_str=True,
    )
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
