"""SimpleLLMFunc's ``type.multimodal`` module: the content parts (:class:`Text`,
:class:`ImgUrl`, :class:`ImgPath`) of :mod:`simplellmfunc.types`."""

from __future__ import annotations

from typing import TypeAlias

from .._content import ImgPath, ImgUrl, Text

__all__ = ["ImgPath", "ImgUrl", "MultimodalContent", "MultimodalList", "Text"]

#: One content part.
MultimodalContent: TypeAlias = Text | ImgUrl | ImgPath
#: Text and images, in the order a model reads them.
MultimodalList: TypeAlias = list[Text | ImgUrl | ImgPath]
