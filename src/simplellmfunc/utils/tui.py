"""SimpleLLMFunc's ``utils.tui`` entry point, waiting for its front end.

The Textual terminal UI does not exist yet. ``tui`` is importable so that SimpleLLMFunc scripts
load, but calling it raises :class:`~simplellmfunc.exceptions.UnsupportedError` naming what is
missing; until then drive the agent yourself (``async for ... in agent(message, history)``)
or with ``simplellmfunc repl``. The tool-card types (``ToolRenderSnapshot`` ...) fail the same
way when imported.
"""

from __future__ import annotations

from typing import Any, NoReturn

from .._compat import compat_getattr
from ..exceptions import UnsupportedError

__all__ = ["tui"]

_MISSING = (
    "the Textual terminal UI front end (SimpleLLMFunc's tui) does not exist in simplellmfunc "
    "yet; iterate the @llm_chat agent yourself, or run an agent config with "
    "`simplellmfunc repl`"
)


def tui(*args: Any, **kwargs: Any) -> NoReturn:
    """SimpleLLMFunc's ``@tui()`` decorator.

    Raises:
        UnsupportedError: Always, until the terminal UI front end exists.
    """
    raise UnsupportedError(_MISSING)


__getattr__ = compat_getattr(
    __name__,
    None,
    {
        "ToolRenderSnapshot": _MISSING,
        "ToolEventRenderUpdate": _MISSING,
        "ToolCustomEventHook": _MISSING,
    },
)
