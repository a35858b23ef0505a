"""The per-instance audit log: ``<LOG_DIR>/pyrepl/<instance_id>/executions.jsonl``.

``LOG_DIR`` comes from the environment, else from ``./.env``, else ``./logs``. Nothing is created
until the first record is written; writes run in a worker thread so the event loop never blocks.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..._persist import write_file_atomic

__all__ = ["AuditLog", "resolve_log_dir"]

_MAX_FIELD_CHARS = 200_000
#: Audit lines up to this size are appended in the event loop (once the log exists).
_INLINE_APPEND_CHARS = 16_384
logger = logging.getLogger("simplellmfunc.pyrepl")


def resolve_log_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Return the absolute log root.

    The first of: ``explicit``, ``$LOG_DIR``, ``LOG_DIR`` in ``./.env``, ``./logs``.
    """
    if explicit is not None:
        return Path(explicit).absolute()
    value = os.environ.get("LOG_DIR")
    if not value and os.path.isfile(".env"):
        from dotenv import dotenv_values

        value = dotenv_values(".env").get("LOG_DIR")
    return Path(value or "logs").absolute()


def _trim(value: Any) -> Any:
    if isinstance(value, str) and len(value) > _MAX_FIELD_CHARS:
        return value[:_MAX_FIELD_CHARS] + f"... [{len(value) - _MAX_FIELD_CHARS:,} more characters]"
    return value


def _artifact_summary(artifact: dict[str, Any]) -> dict[str, Any]:
    # Image bytes stay out of the log: it records what was shown, not the pixels.
    summary = {k: v for k, v in artifact.items() if k != "data"}
    if "data" in artifact:
        summary["base64_chars"] = len(artifact["data"])
    return summary


class AuditLog:
    """Appends one JSON line per execution; spill files live next to it in ``outputs/``."""

    def __init__(self, root: Path, instance_id: str) -> None:
        self.directory = root / "pyrepl" / instance_id
        self.file = self.directory / "executions.jsonl"
        self._path = str(self.file)
        self._outputs = os.path.join(self.directory, "outputs")  # a str: no Path per call
        self.instance_id = instance_id
        self._warned = False
        self._made = False  # whether the directory was made and the log written once

    def _failed(self, what: str, exc: OSError) -> None:
        # A log that cannot be written must not fail the execution it records; say so once.
        if not self._warned:
            self._warned = True
            logger.warning("PyRepl %s: cannot write %s: %s", self.instance_id, what, exc)

    def spill_path(self, sequence: int, stream: str) -> str:
        """Where the full output of execution ``sequence`` goes when it is cut."""
        return os.path.join(self._outputs, f"{sequence:05d}-{stream}.txt")

    async def record(
        self,
        *,
        sequence: int,
        started: datetime,
        code: str,
        result: dict[str, Any],
        settings: dict[str, Any],
    ) -> None:
        """Append the record of one execution."""
        entry = {
            "time": started.astimezone(UTC).isoformat(),
            "instance_id": self.instance_id,
            "sequence": sequence,
            "code": code,
            "settings": settings,
            "result": {
                **{k: _trim(v) for k, v in result.items() if k != "artifacts"},
                "artifacts": [_artifact_summary(a) for a in result.get("artifacts") or []],
            },
        }
        line = json.dumps(entry, ensure_ascii=False, default=str) + "\n"
        try:
            if self._made and len(line) <= _INLINE_APPEND_CHARS:
                # A short append to a file that exists: microseconds, less than waking a
                # worker thread and coming back (a thread round trip per execution).
                self._append(line)
            else:
                await anyio.to_thread.run_sync(self._append, line)
        except OSError as exc:
            self._failed("the audit log", exc)

    def _append(self, line: str) -> None:
        if not self._made:
            self.directory.mkdir(parents=True, exist_ok=True)
        # One O_APPEND write per line: no buffered text file to build and flush per execution,
        # and a line is never interleaved with another writer's.
        data = line.encode("utf-8")
        fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)
        self._made = True

    async def write_spill(self, path: str, text: str) -> bool:
        """Write a full output file (atomically: a reader never sees half of it); False (and a
        logged warning) when that fails."""

        def write() -> None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write_file_atomic(path, text)

        try:
            await anyio.to_thread.run_sync(write)
        except OSError as exc:
            self._failed("an output file", exc)
            return False
        return True
