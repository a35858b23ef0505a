"""Events on the wire: a compact JSON form, Server-Sent Events, and the AG-UI protocol.

* :func:`to_wire` / :class:`WirePolicy`: the JSON-safe dict of an event or result, with a size
  policy for message lists and long texts (every field is listed in ``docs/wire.md``).
* :func:`encode_sse` / :func:`sse_stream`: Server-Sent Events of a call with
  ``enable_event=True`` (or of a session's turn).
* :class:`AGUIAdapter` / :func:`agui_sse_stream`: the same stream as AG-UI protocol events
  (needs the ``[agui]`` extra: ``ag-ui-protocol``; imported on first use).

Closing one of the streams closes the call it reads (a client that disconnects ends the run
there; a session's turn ends it like an abort and keeps the history).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish
from ._json import WirePolicy, jsonable, to_wire
from ._sse import encode_sse, sse_stream

if TYPE_CHECKING:
    from ._agui import AGUIAdapter, agui_resume_answers, agui_sse_stream

__all__ = [
    "AGUIAdapter",
    "WirePolicy",
    "agui_resume_answers",
    "agui_sse_stream",
    "encode_sse",
    "jsonable",
    "sse_stream",
    "to_wire",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AGUIAdapter": "._agui",
        "agui_resume_answers": "._agui",
        "agui_sse_stream": "._agui",
    },
)

publish(__name__, __all__)
