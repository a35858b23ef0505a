"""Test kit: a wire-level mock LLM server with scripted replies and fault injection, cassettes
that record a run's provider exchanges and replay them offline, and prompt-prefix checks.

Example:
    >>> from simplellmfunc.testing import MockLLMServer, Reply, ToolCallSpec
    >>> async with MockLLMServer() as server:  # doctest: +SKIP
    ...     server.script(Reply.tool_calls(ToolCallSpec("add", {"a": 1, "b": 2})))
    ...     ...  # point a client at server.url, then inspect server.requests
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports, publish

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "STRICT": "._cassette",
        "Canned": "._scripted",
        "Cassette": "._cassette",
        "CassetteTransport": "._cassette",
        "DeltaShape": "._script",
        "Interaction": "._cassette",
        "LineEnding": "._script",
        "MatchField": "._cassette",
        "MockLLMServer": "._server",
        "PrefixDrift": "._prefix",
        "RecordMode": "._cassette",
        "RecordedRequest": "._script",
        "Reply": "._script",
        "ReplyOptions": "._script",
        "ScriptedLLM": "._scripted",
        "TmuxTerminal": "._tmux",
        "ToolCallSpec": "._script",
        "assert_stable_prefix": "._prefix",
        "compare_prefixes": "._prefix",
        "hashed_embedding": "._render_embeddings",
        "key_fingerprint": "._script",
        "postgres_cluster": "._postgres",
        "postgres_missing": "._postgres",
        "prefix_drifts": "._prefix",
        "request_fields": "._cassette",
        "tmux_available": "._tmux",
        "use_cassette": "._cassette",
    },
)

publish(__name__, __all__)
