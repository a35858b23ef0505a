"""The config's ``knowledge``, ``skills`` and ``memory`` sections: what the agent draws on
besides its tools (a searched knowledge base, Agent Skills folders, a memory store)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ._sections import SECTION, Name, Positive, ToolName

__all__ = [
    "EmbeddingsConfig",
    "KnowledgeConfig",
    "MemoryConfig",
    "SkillsConfig",
]


class _Section(BaseModel):
    model_config = SECTION


class EmbeddingsConfig(_Section):
    """An OpenAI-compatible ``/embeddings`` endpoint (llama.cpp ``--embedding``, OpenAI ...).

    Attributes:
        model: The embedding model.
        base_url: The API root, e.g. ``http://127.0.0.1:8080/v1``.
        api_key_env: The environment variable holding the key (none for a local server).
        dimensions: Ask for vectors of this size (OpenAI's ``dimensions``).
    """

    model: Annotated[str, Field(min_length=1)]
    base_url: Annotated[str, Field(min_length=1)]
    api_key_env: str | None = None
    dimensions: Annotated[int, Field(ge=1)] | None = None


class KnowledgeConfig(_Section):
    """A knowledge base the agent searches with a ``retrieve`` tool (``runtime.retrieval``).

    Attributes:
        sources: Files and folders to ingest when the agent starts (only what changed since
            the last time is read again; files gone from a folder are removed).
        path: The knowledge base file (SQLite); default: in memory, rebuilt each start.
        k: Passages per search.
        token_budget: Most tokens of one ``retrieve`` result.
        mode: ``bm25``, ``dense`` or ``hybrid`` (default: hybrid with embeddings, else BM25).
        embeddings: Vectors for dense and hybrid search (needs the ``[rag]`` extra).
        tool_name: The tool's name.
        max_chunk_chars: Target passage size.
    """

    sources: list[Annotated[str, Field(min_length=1)]] = []
    path: str | None = None
    k: Annotated[int, Field(ge=1, le=20)] = 5
    token_budget: Annotated[int, Field(ge=50)] = 1500
    mode: Literal["bm25", "dense", "hybrid"] | None = None
    embeddings: EmbeddingsConfig | None = None
    tool_name: ToolName = "retrieve"
    max_chunk_chars: Annotated[int, Field(ge=100)] = 1500


class SkillsConfig(_Section):
    """Skills (Agent Skills folders); ``skills: [dir, ...]`` is short for ``{paths: [...]}``.

    Attributes:
        paths: Folders holding skill folders (or one skill folder each).
        discover: Load skills chosen for each message before the model answers: ``search``
            (word search), ``llm`` (one call of the agent's model) or ``off``.
        max_skills: How many skills discovery loads at most.
        scripts: Let the model run the skills' scripts (``run_skill_script``).
        script_timeout: Seconds before a script is killed.
    """

    paths: list[Annotated[str, Field(min_length=1)]] = []
    discover: Literal["off", "search", "llm"] = "off"
    max_skills: Annotated[int, Field(ge=1)] = 3
    scripts: bool = False
    script_timeout: Positive = 60.0


class MemoryConfig(_Section):
    """Agent memory: a store, its namespace, and what is saved.

    Attributes:
        store: ``none`` (no memory), ``memory`` (this process; ``local``, the seed's name,
            is the same), ``sqlite`` (a file; needs
            ``path``) or ``redis`` (several processes; needs ``url``).
        path: The SQLite file.
        url: The Redis URL.
        prefix: The Redis key prefix.
        agent: The namespace's agent name (default: the config's ``name``).
        session: The namespace's session name.
        recent: How many of the newest items each LLM call sees.
        ttl: Seconds an item lives (``null``: forever).
        max_items: Most items kept (least recently used go first).
        auto_save: Strategies run after each tool batch and answered turn.
        save_turns: Also save answered turns (what the user said, what the agent answered).
    """

    store: Literal["none", "memory", "local", "sqlite", "redis"] = "none"
    path: str | None = None
    url: str | None = None
    prefix: str = "simplellmfunc"
    agent: Name | None = None
    session: Name = "default"
    recent: Annotated[int, Field(ge=0)] = 5
    ttl: Positive | None = None
    max_items: Annotated[int, Field(ge=1)] | None = None
    auto_save: list[Literal["step_triple", "key_value", "llm_summary"]] = ["step_triple"]
    save_turns: bool = True
