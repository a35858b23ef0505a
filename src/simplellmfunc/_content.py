"""Content parts: text and images, as users pass them and as providers receive them."""

from __future__ import annotations

import base64
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema

from .exceptions import ContentError

__all__ = ["ContentPart", "Detail", "ImgPath", "ImgUrl", "Text", "part_from_dict"]

Detail: TypeAlias = Literal["auto", "low", "high"]
_DETAILS = ("auto", "low", "high")
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_URL_SCHEMES = frozenset({"http", "https"})


def _check_detail(detail: str) -> None:
    if detail not in _DETAILS:
        raise ContentError(f"image detail must be one of {_DETAILS}, got {detail!r}")


@dataclass(frozen=True, slots=True)
class Text:
    """A text content part."""

    text: str

    @property
    def content(self) -> str:
        """The text (SimpleLLMFunc's name for it)."""
        return self.text

    def __str__(self) -> str:
        return self.text

    def to_part(self) -> dict[str, Any]:
        """Return the OpenAI-style content part."""
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ImgUrl:
    """An image at an ``http(s)`` URL or in a ``data:image/...`` URL.

    Raises:
        ContentError: For another scheme, a non-image data URL or an unknown ``detail``.
    """

    url: str
    detail: Detail = "auto"

    def __post_init__(self) -> None:
        _check_detail(self.detail)
        if self.url.startswith("data:"):
            mime = self.url[5:].split(";", 1)[0].split(",", 1)[0]
            if mime not in _IMAGE_MIMES:
                raise ContentError(f"data URL is not a supported image type: {mime!r}")
            return
        parts = urlsplit(self.url)
        if parts.scheme not in _URL_SCHEMES or not parts.netloc:
            raise ContentError(f"image URL must be http(s) or data:image: {self.url[:80]!r}")

    def to_part(self) -> dict[str, Any]:
        """Return the OpenAI-style ``image_url`` content part."""
        return {"type": "image_url", "image_url": {"url": self.url, "detail": self.detail}}

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return _coercing_schema(cls, lambda v: cls(str(v)))


@dataclass(frozen=True, slots=True)
class ImgPath:
    """An image file on the local disk, sent to providers as a data URL.

    Raises:
        ContentError: If the file does not exist or is not a PNG, JPEG, GIF or WebP image.
    """

    path: Path
    detail: Detail = "auto"

    def __init__(self, path: str | Path, detail: Detail = "auto") -> None:
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "detail", detail)
        _check_detail(detail)
        if not self.path.is_file():
            raise ContentError(f"image file not found: {self.path}")
        if self.mime_type not in _IMAGE_MIMES:
            raise ContentError(f"not a supported image type ({self.mime_type}): {self.path}")

    @property
    def mime_type(self) -> str:
        """The image MIME type, guessed from the file name."""
        return mimetypes.guess_type(self.path.name)[0] or "application/octet-stream"

    def to_data_url(self) -> str:
        """Read the file and return it as a base64 ``data:`` URL."""
        data = base64.b64encode(self.path.read_bytes()).decode("ascii")
        return f"data:{self.mime_type};base64,{data}"

    def to_img_url(self) -> ImgUrl:
        """Return the equivalent :class:`ImgUrl` (a data URL)."""
        return ImgUrl(self.to_data_url(), self.detail)

    def to_part(self) -> dict[str, Any]:
        """Return the OpenAI-style ``image_url`` content part (a data URL)."""
        return self.to_img_url().to_part()

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return _coercing_schema(cls, lambda v: cls(v))


ContentPart: TypeAlias = Text | ImgUrl | ImgPath


def _coercing_schema(cls: type, make: Any) -> Any:
    """Accept an instance as-is, or a string / path that ``make`` turns into one."""

    def validate(value: Any) -> Any:
        if isinstance(value, cls):
            return value
        if isinstance(value, str | Path):
            return make(value)
        raise ValueError(f"expected {cls.__name__} or a string")

    return core_schema.no_info_plain_validator_function(
        validate,
        json_schema_input_schema=core_schema.str_schema(),
        serialization=core_schema.plain_serializer_function_ser_schema(
            lambda v: str(v.path if isinstance(v, ImgPath) else v.url)
        ),
    )


def part_from_dict(part: dict[str, Any]) -> Text | ImgUrl:
    """Parse an OpenAI-style content part.

    Raises:
        ContentError: For an unknown part type or a malformed part.
    """
    kind = part.get("type")
    if kind == "text" and isinstance(part.get("text"), str):
        return Text(part["text"])
    if kind == "image_url":
        image = part.get("image_url")
        if isinstance(image, str):
            return ImgUrl(image)
        if isinstance(image, dict) and isinstance(image.get("url"), str):
            return ImgUrl(image["url"], image.get("detail", "auto"))
    raise ContentError(f"unsupported content part: {str(part)[:120]}")
