"""SimpleLLMFunc's ``type.llm`` module: a model's reply, its stream pieces and token usage.

``LLMResponse`` is :class:`simplellmfunc.providers.LLMResponse` (what ``return_mode="raw"``
yields for a plain call), ``LLMStreamChunk`` one provider stream event (``TextDelta``,
``ToolCallDelta`` ...), ``LLMUsage`` :class:`simplellmfunc.types.Usage`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._compat import compat_getattr
from .._usage import Usage

if TYPE_CHECKING:
    from ..providers import LLMResponse
    from ..providers import StreamEvent as LLMStreamChunk

__all__ = ["LLMResponse", "LLMStreamChunk", "LLMUsage"]

LLMUsage = Usage

__getattr__: Any = compat_getattr(
    __name__,
    {
        "LLMResponse": (".providers", "LLMResponse"),
        "LLMStreamChunk": (".providers", "StreamEvent"),
    },
)
