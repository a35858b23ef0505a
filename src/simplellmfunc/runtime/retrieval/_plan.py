"""Ingestion plans: which files (or documents given as text) are new, changed, unchanged or
gone, read and chunked, before anything is written.

A file whose size and modification time are unchanged is not read; a file read again with the
same content hash is not re-chunked (it is only recorded again, ``touched``); files that were
under an ingested folder and are gone are listed in ``gone`` when pruning.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ..._unicode import replace_surrogates
from ...exceptions import UserError
from ._chunk import Chunk, DocKind, chunk_text
from ._files import FileEntry, Skipped, read_chunks, root_label, walk
from ._passage import IngestReport

__all__ = [
    "EMIT_BATCH",
    "TEXT_PREFIX",
    "Change",
    "Known",
    "Plan",
    "plan_targets",
    "plan_texts",
    "report",
    "text_name",
]

TEXT_PREFIX: Final = "text:"  # the path of a document added as text: this and its source
EMIT_BATCH: Final = 16  # files whose chunks are handed to the writer together
Known = dict[str, tuple[int, int, str, str]]  # path: (size, mtime_ns, sha256, root)


@dataclass(slots=True)
class Change:
    """A new or changed file: its content hash and all its chunks."""

    entry: FileEntry
    sha256: str
    chunks: list[Chunk]
    new: bool


@dataclass(slots=True)
class Plan:
    """What one ingestion changes."""

    changes: list[Change] = field(default_factory=list)
    touched: list[tuple[FileEntry, str, int]] = field(default_factory=list)  # same content
    gone: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0
    unchanged: int = 0


def text_name(text: str) -> str:
    """The default source of a document added as text: ``doc-`` and a content hash."""
    digest = hashlib.sha256(replace_surrogates(text).encode("utf-8")).hexdigest()
    return f"doc-{digest[:12]}"


def plan_targets(
    targets: Sequence[str | os.PathLike[str]],
    known: Known,
    labels: dict[str, str],
    prune: bool,
    max_chunk_chars: int,
    *,
    plan: Plan | None = None,
    emit: Callable[[list[Change]], None] | None = None,
) -> Plan:
    """What to ingest of files and folders; ``emit`` is handed the changes as they are found,
    in batches.

    Raises:
        UserError: If a target does not exist.
    """
    plan = Plan() if plan is None else plan
    sent = 0
    seen: set[str] = set()
    roots: list[str] = []
    taken = set(labels.values())
    for target in targets:
        root = Path(target).expanduser().resolve()
        label = labels.get(str(root))
        if label is None:  # a new root: a label no other root has
            label = root_label(root, taken)
            taken.add(label)
        try:
            entries = list(walk(target, label))
        except FileNotFoundError:
            raise UserError(f"nothing to ingest at {os.fspath(target)!r}") from None
        roots.append(str(root))
        for entry in entries:
            if isinstance(entry, Skipped):
                plan.skipped.append(entry)
            elif entry.path not in seen:
                seen.add(entry.path)
                _plan_file(plan, entry, known.get(entry.path), max_chunk_chars)
                if emit is not None and len(plan.changes) - sent >= EMIT_BATCH:
                    emit(plan.changes[sent:])
                    sent = len(plan.changes)
    if emit is not None and len(plan.changes) > sent:
        emit(plan.changes[sent:])
    if prune:
        plan.gone = [
            path
            for path, (*_, root) in known.items()
            if path not in seen and any(root == r or path.startswith(r + os.sep) for r in roots)
        ]
    return plan


def _plan_file(
    plan: Plan, entry: FileEntry, old: tuple[int, int, str, str] | None, max_chunk_chars: int
) -> None:
    if old is not None and (old[0], old[1]) == (entry.size, entry.mtime_ns):
        plan.files += 1
        plan.unchanged += 1
        return
    try:
        read = read_chunks(entry, max_chunk_chars)
    except OSError as exc:
        read = Skipped(entry.source, f"cannot be read: {exc.strerror or exc}")
    if isinstance(read, Skipped):
        plan.skipped.append(read)
        return
    plan.files += 1
    sha, chunks = read
    if old is not None and old[2] == sha:
        plan.unchanged += 1
        plan.touched.append((entry, sha, len(chunks)))
    else:
        plan.changes.append(Change(entry, sha, chunks, old is None))


def plan_texts(
    items: Sequence[tuple[str, str]], known: Known, kind: DocKind, max_chunk_chars: int
) -> Plan:
    """What to ingest of documents given as ``(source, text)`` (a later one of the same source
    replaces an earlier one). Text that is not valid Unicode gets U+FFFD in its place."""
    plan = Plan()
    for raw_source, raw_text in items:
        source, text = replace_surrogates(raw_source), replace_surrogates(raw_text)
        path = TEXT_PREFIX + source
        data = text.encode("utf-8")
        entry = FileEntry(path, source, "", len(data), 0)
        sha = hashlib.sha256(data).hexdigest()
        plan.files += 1
        if path in known and known[path][2] == sha:
            plan.unchanged += 1
            continue
        chunks = chunk_text(text, source, kind, max_chars=max_chunk_chars)
        plan.changes = [c for c in plan.changes if c.entry.path != path]
        plan.changes.append(Change(entry, sha, chunks, path not in known))
    return plan


def report(
    plan: Plan, *, added: int, removed: int, kept: int, embedded: int, started: float
) -> IngestReport:
    """The report of a written plan (``added``, ``removed``, ``kept``: chunks; ``started``: a
    :func:`time.perf_counter` reading)."""
    new_files = sum(c.new for c in plan.changes)
    return IngestReport(
        files=plan.files,
        added=new_files,
        updated=len(plan.changes) - new_files,
        unchanged=plan.unchanged,
        deleted=len(plan.gone),
        skipped=plan.skipped,
        chunks_added=added,
        chunks_removed=removed,
        chunks_kept=kept,
        embedded=embedded,
        seconds=time.perf_counter() - started,
    )
