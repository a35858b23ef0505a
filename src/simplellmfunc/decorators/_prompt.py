"""Prompts from docstrings and arguments: template params, argument rendering, content parts."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, is_dataclass

import anyio.to_thread
from pydantic import BaseModel

from .._content import ContentPart, ImgPath, ImgUrl, Text
from .._messages import UserMessage, user_message

__all__ = ["HISTORY_NAMES", "fill_template", "render_arguments", "render_value"]

HISTORY_NAMES = ("history", "chat_history")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_QUALIFIED = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*)")


def fill_template(text: str, params: Mapping[str, object] | None) -> str:
    """Replace ``{name}`` for each ``name`` in ``params``; every other brace is left alone.

    Docstrings often contain JSON examples, so ``str.format`` (which chokes on them) is not used.
    """
    if not params:
        return text
    return _PLACEHOLDER.sub(
        lambda m: str(params[m.group(1)]) if m.group(1) in params else m.group(0), text
    )


def docstring_of(func: Callable[..., object]) -> str:
    """The cleaned docstring (empty if there is none)."""
    return inspect.cleandoc(func.__doc__ or "")


def render_value(value: object) -> str:
    """A value as text for the prompt: strings as-is, models and containers as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if is_dataclass(value) and not isinstance(value, type):
        return json.dumps(asdict(value), ensure_ascii=False, default=str)
    try:
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    except (TypeError, ValueError):
        return repr(value)


def _json_default(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return str(value)


def _images(value: object) -> list[ImgUrl | ImgPath] | None:
    if isinstance(value, ImgUrl | ImgPath):
        return [value]
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(v, ImgUrl | ImgPath) for v in value)
    ):
        return list(value)
    return None


_TYPE_NAMES: dict[object, str] = {}  # annotation -> label: the same few, on every call
_TYPE_NAMES_MAX = 1024


def _type_name(annotation: object) -> str:
    """A short type label: ``int``, ``list[ImgUrl]``, ``Optional[Address]`` (no module paths)."""
    if annotation is inspect.Parameter.empty:
        return ""
    if isinstance(annotation, type):
        return annotation.__name__
    try:
        return _TYPE_NAMES[annotation]
    except KeyError:
        name = _QUALIFIED.sub(r"\1", str(annotation))
        if len(_TYPE_NAMES) < _TYPE_NAMES_MAX:
            _TYPE_NAMES[annotation] = name
        return name
    except TypeError:  # an unhashable annotation (Annotated metadata): not cached
        return _QUALIFIED.sub(r"\1", str(annotation))


async def render_arguments(
    signature: inspect.Signature,
    arguments: Mapping[str, object],
    *,
    bare_single_text: bool,
) -> UserMessage:
    """The user message for a call: each argument by name and type; images as content parts.

    With ``bare_single_text`` a lone string argument is sent as-is (a chat message).
    """
    if bare_single_text and len(arguments) == 1:
        (only,) = arguments.values()
        if isinstance(only, str):
            return UserMessage(only)
    parts: list[ContentPart | str] = []
    for name, value in arguments.items():
        annotation = signature.parameters[name].annotation
        type_name = _type_name(annotation)
        label = f"{name} ({type_name})" if type_name else name
        images = _images(value)
        if images is None:
            if isinstance(value, Text):
                value = value.text
            parts.append(f"{label}: {render_value(value)}\n")
            continue
        parts.append(f"{label}:\n")
        for image in images:
            parts.append(await _as_url(image))
        parts.append("\n")
    return user_message(_merge_text(parts))


def _merge_text(parts: list[ContentPart | str]) -> list[ContentPart | str]:
    """Join adjacent text pieces, so providers get one text part between images."""
    merged: list[ContentPart | str] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    return merged


async def _as_url(image: ImgUrl | ImgPath) -> ImgUrl:
    if isinstance(image, ImgUrl):
        return image
    return await anyio.to_thread.run_sync(image.to_img_url)
