"""SimpleLLMFunc's ``SimpleLLMFunc.tool`` module: :class:`~simplellmfunc.tools.Tool` and
``@tool`` (``from simplellmfunc.tool import tool``, as SimpleLLMFunc's README writes it).

``simplellmfunc.tool`` is also the name of the ``@tool`` decorator on the package
(``from simplellmfunc import tool``). ``simplellmfunc.tool.tool`` is SimpleLLMFunc's module path
of the same names. Once this module is imported, the package attribute is this
module, so the module is callable and calling it is calling ``@tool``: both spellings keep
working whichever is imported first.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .._compat import keep_package_attributes
from ..tools import Tool
from ..tools import tool as tool

__all__ = ["TOO_LONG_TO_FILE_MAX_TOKENS", "Tool", "tool"]

#: The default token budget of one tool result (``EngineOptions.tool_result_budget``): a longer
#: result is cut to head and tail, and with ``too_long_to_file=True`` the full text is saved to a
#: file whose path the model is given. (SimpleLLMFunc's limit was 20 000 tokens.)
TOO_LONG_TO_FILE_MAX_TOKENS = 8000


class _CallableModule(types.ModuleType):
    """This module, callable as ``@tool``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return tool(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
# ``simplellmfunc.tool.tool`` (SimpleLLMFunc's module path) leaves ``tool`` the decorator.
keep_package_attributes(__name__, "tool")
