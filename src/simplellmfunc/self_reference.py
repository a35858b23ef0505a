"""SimpleLLMFunc's legacy ``self_reference`` module: ``SelfReference`` is
:class:`simplellmfunc.builtin.SelfReference`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._compat import compat_getattr

if TYPE_CHECKING:
    from .builtin import SelfReference

__all__ = ["SelfReference"]

__getattr__: Any = compat_getattr(__name__, {"SelfReference": (".builtin", "SelfReference")})
