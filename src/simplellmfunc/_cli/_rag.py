"""``simplellmfunc rag ingest|search|list|delete``: knowledge bases from the command line.

::

    simplellmfunc rag ingest docs/ src/ --kb project
    simplellmfunc rag search "how is a run aborted?" --kb project -k 3
    simplellmfunc rag ingest docs/ --kb project --embed-url http://127.0.0.1:8080/v1 \\
        --embed-model nomic-embed-text          # adds vectors: hybrid search from now on
    simplellmfunc rag list --kb project
    simplellmfunc rag delete docs/old.md --kb project

``--kb NAME`` is ``./.simplellmfunc/kb/NAME.db``; a value with a ``/`` or a ``.db`` suffix is
a file path. The embedding endpoint and model given at ingestion are remembered in the file
(never the key: ``--embed-key-env`` names a variable), so ``search`` uses them again.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import anyio

from ..exceptions import ConfigError, SimpleLLMFuncError
from ..providers import OpenAIEmbeddings
from ..runtime.retrieval import KnowledgeBase, format_passages
from ._output import EXIT_OK, report_error

__all__ = ["handle_rag", "kb_path"]

_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def kb_path(name: str) -> Path:
    """The file of the knowledge base ``name`` (see the module docstring)."""
    if "/" in name or os.sep in name or name.endswith(_SUFFIXES):
        return Path(name).expanduser()
    return Path.cwd() / ".simplellmfunc" / "kb" / f"{name}.db"


def _key(variable: str | None) -> list[str] | None:
    if not variable:
        return None
    keys = [k.strip() for k in os.environ.get(variable, "").split(",") if k.strip()]
    if not keys:
        raise ConfigError(f"--embed-key-env: {variable} is not set")
    return keys


def _remembered(path: Path) -> tuple[str, str] | None:
    """The embedding endpoint and model a knowledge base was built with, if any."""
    kb = KnowledgeBase(path)
    try:
        url, model = kb.embedding_endpoint()
    finally:
        kb.close()
    return (url, model) if url and model else None


def _embedder(args: argparse.Namespace, path: Path) -> OpenAIEmbeddings | None:
    url, model = getattr(args, "embed_url", None), getattr(args, "embed_model", None)
    if bool(url) != bool(model):
        raise ConfigError("give both --embed-url and --embed-model")
    if not url and path.exists() and getattr(args, "mode", None) != "bm25":
        url, model = _remembered(path) or (None, None)
    if not url or not model:
        return None
    size = getattr(args, "dimensions", None)
    return OpenAIEmbeddings(model, url, _key(args.embed_key_env), dimensions=size)


async def _run(args: argparse.Namespace) -> Any:
    path = kb_path(args.kb)
    if args.rag_command != "ingest" and not path.exists():
        raise ConfigError(f"no knowledge base {args.kb!r} ({path}); create it with rag ingest")
    embedder = _embedder(args, path)
    try:
        # One search per process: no event loop to keep free, so no worker thread either.
        async with KnowledgeBase(path, embedder=embedder, offload=False) as kb:
            return await _act(args, kb)
    finally:
        if embedder is not None:
            await embedder.aclose()


async def _act(args: argparse.Namespace, kb: KnowledgeBase) -> Any:
    action = args.rag_command
    if action == "ingest":
        report = await kb.ingest(*args.paths, prune=not args.no_prune)
        return report if args.format == "text" else _fields(report)
    if action == "search":
        if args.mode in ("dense", "hybrid") and kb.embedder is None:
            raise ConfigError(
                f"{args.mode} search: the knowledge base has no vectors; ingest with "
                "--embed-url and --embed-model first"
            )
        passages = await kb.search(args.query, args.k, mode=args.mode)
        if args.format == "json":
            return [{**_fields(p), "citation": p.citation} for p in passages]
        return format_passages(passages, args.budget) or "no passage matches"
    if action == "list":
        sources = await kb.sources()
        if args.format == "json":
            return [_fields(s) for s in sources]
        return "\n".join(f"{s.source}  ({s.chunks} passages)" for s in sources) or "empty"
    removed = await kb.delete(*args.paths)
    if args.format == "json":
        return {"removed": removed}
    return f"{removed} file{'s' if removed != 1 else ''} removed"


def _fields(value: Any) -> dict[str, Any]:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def handle_rag(args: argparse.Namespace) -> int:
    """Run a ``rag`` action; return the exit status."""
    try:
        result = anyio.run(_run, args)
    except SimpleLLMFuncError as exc:
        return report_error(exc, as_json=args.format == "json")
    if isinstance(result, str | list | dict) and args.format == "json":
        print(json.dumps(result, indent=2, default=str))
    else:
        print(result)
    return EXIT_OK
