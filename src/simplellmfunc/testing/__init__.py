"""Test kit: a wire-level mock LLM server with scripted replies and fault injection.

Example:
    >>> from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
    >>> async with MockLLMServer() as server:  # doctest: +SKIP
    ...     server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2})))
    ...     ...  # point a client at server.url, then inspect server.requests
"""

from .._lazy import publish
from ._postgres import postgres_cluster, postgres_missing
from ._render_embeddings import hashed_embedding
from ._script import (
    DeltaShape,
    LineEnding,
    RecordedRequest,
    Reply,
    ReplyOptions,
    ToolCallSpec,
    key_fingerprint,
)
from ._scripted import Canned, ScriptedLLM
from ._server import MockLLMServer
from ._tmux import TmuxTerminal, tmux_available

__all__ = [
    "Canned",
    "DeltaShape",
    "LineEnding",
    "MockLLMServer",
    "RecordedRequest",
    "Reply",
    "ReplyOptions",
    "ScriptedLLM",
    "TmuxTerminal",
    "ToolCallSpec",
    "hashed_embedding",
    "key_fingerprint",
    "postgres_cluster",
    "postgres_missing",
    "tmux_available",
]

publish(__name__, __all__)
