"""``simplellmfunc serve``: an agent over HTTP (Starlette + uvicorn).

:func:`create_app` builds the ASGI app: A2A (agent card, JSON-RPC), an OpenAI-compatible
``/v1/chat/completions`` (streaming included) and ``/health``, behind bearer-token auth;
:func:`serve_config` opens a configured agent and serves it until a signal, shutting down
gracefully (running turns aborted, each with a valid history), with ``--web`` the web chat page
too; :func:`serve_app` serves any app that way; :func:`running` serves an app under uvicorn in
the current event loop while a block runs (tests, embedding).
"""

from .._lazy import publish
from ._app import create_app
from ._main import ServeSettings, is_loopback, serve_config
from ._uvicorn import running, serve_app

__all__ = ["ServeSettings", "create_app", "is_loopback", "running", "serve_app", "serve_config"]

publish(__name__, __all__)
