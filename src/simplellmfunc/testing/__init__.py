"""Test kit: a wire-level mock LLM server with scripted replies and fault injection.

Example:
    >>> from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
    >>> async with MockLLMServer() as server:  # doctest: +SKIP
    ...     server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2})))
    ...     ...  # point a client at server.url, then inspect server.requests
"""

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

__all__ = [
    "Canned",
    "DeltaShape",
    "LineEnding",
    "MockLLMServer",
    "RecordedRequest",
    "Reply",
    "ReplyOptions",
    "ScriptedLLM",
    "ToolCallSpec",
    "hashed_embedding",
    "key_fingerprint",
]
