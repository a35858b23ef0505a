"""A web chat page for an ``@llm_chat`` agent: one self-contained page, events over SSE.

:func:`web_chat_app` makes a Starlette (ASGI) app that serves the page (HTML, JavaScript and
CSS from this package: no build step, no CDN) and its API. Each browser tab is a session of a
:class:`~simplellmfunc.runtime.SessionStore` (its own history and PyRepl kernel); the page shows
Markdown replies, a card per tool call with the kernel's live output and images, ``input()``
prompts, and an abort button. ``simplellmfunc web CONFIG`` serves a config's agent with it;
:func:`web_chat_routes` mounts the same page in an app of one's own (``simplellmfunc serve
CONFIG --web`` does), behind :class:`~simplellmfunc.runtime.serving.EdgeGuard`, the one edge
check (Host, origin, token, body) of every server.
Needs the ``[web]`` extra (``starlette``, ``uvicorn``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish
from ..runtime.serving import is_loopback

if TYPE_CHECKING:
    from ._app import PAGE_PATHS, STATIC_PREFIX, page_error, web_chat_app, web_chat_routes

__all__ = [
    "PAGE_PATHS",
    "STATIC_PREFIX",
    "is_loopback",
    "page_error",
    "web_chat_app",
    "web_chat_routes",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(
        ("PAGE_PATHS", "STATIC_PREFIX", "page_error", "web_chat_app", "web_chat_routes"), "._app"
    ),
)

publish(__name__, __all__)
