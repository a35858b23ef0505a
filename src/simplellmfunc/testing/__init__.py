"""Test kit: a wire-level mock LLM server with scripted replies and fault injection, cassettes
that record a run's provider exchanges and replay them offline, and prompt-prefix checks.

Example:
    >>> from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
    >>> async with MockLLMServer() as server:  # doctest: +SKIP
    ...     server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2})))
    ...     ...  # point a client at server.url, then inspect server.requests
"""

from .._lazy import publish
from ._cassette import (
    STRICT,
    Cassette,
    CassetteTransport,
    Interaction,
    MatchField,
    RecordMode,
    request_fields,
    use_cassette,
)
from ._postgres import postgres_cluster, postgres_missing
from ._prefix import PrefixDrift, assert_stable_prefix, compare_prefixes, prefix_drifts
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
    "STRICT",
    "Canned",
    "Cassette",
    "CassetteTransport",
    "DeltaShape",
    "Interaction",
    "LineEnding",
    "MatchField",
    "MockLLMServer",
    "PrefixDrift",
    "RecordMode",
    "RecordedRequest",
    "Reply",
    "ReplyOptions",
    "ScriptedLLM",
    "TmuxTerminal",
    "ToolCallSpec",
    "assert_stable_prefix",
    "compare_prefixes",
    "hashed_embedding",
    "key_fingerprint",
    "postgres_cluster",
    "postgres_missing",
    "prefix_drifts",
    "request_fields",
    "tmux_available",
    "use_cassette",
]

publish(__name__, __all__)
