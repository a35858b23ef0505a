"""The terminal chat front end (Textual): ``simplellmfunc chat CONFIG`` and :func:`chat_app`.

Built on the public event stream only: :class:`TurnView` folds a turn's events into reply
blocks and tool cards (:class:`ToolRenderSnapshot`), :class:`ChatApp` shows them and runs the
turns through the serving door, :meth:`~simplellmfunc.serving.ServedAgent.turn` (a one-session
``ServedAgent``: history, abort, ``input()``).
Needs the ``tui`` extra (``pip install simplellmfunc[tui]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._lazy import publish
from ._app import ChatApp
from ._view import (
    ReplyBlock,
    ToolCustomEventHook,
    ToolEventRenderUpdate,
    ToolRenderSnapshot,
    TurnView,
    format_usage,
)

__all__ = [
    "ChatApp",
    "ReplyBlock",
    "ToolCustomEventHook",
    "ToolEventRenderUpdate",
    "ToolRenderSnapshot",
    "TurnView",
    "chat_app",
    "format_usage",
]


def chat_app(agent: Callable[..., Any], **options: Any) -> ChatApp:
    """A :class:`ChatApp` for a decorated agent; ``chat_app(agent).run()`` opens it.

    ``options`` are :class:`ChatApp`'s keyword arguments (``session=``, ``store=``,
    ``pyrepl=``, ``hooks=``, ``prices=``, ``title=`` ...).
    """
    return ChatApp(agent, **options)


publish(__name__, __all__)
