"""CheckpointManager: numbered checkpoint files in one directory.

Files are ``cp_001.json``, ``cp_002.json``, …; numbers only grow. A save takes the next number
after both the highest file present and a high-water mark kept in ``.cp_last`` (so a number that
a rollback or pruning freed is never handed out again), and creates its file atomically and
exclusively with :func:`~simplellmfunc._persist.create_file_exclusive`: the text goes to a
temporary file first, which is then hard-linked to the final name (``link`` fails when the name
exists, like ``O_EXCL``, and readers never see a partly written checkpoint). A save that loses a
race to another process takes the next number; nothing is ever overwritten. After a save, files
beyond ``max_checkpoints`` are deleted, oldest first. ``.cp_last`` and single checkpoint files
(:func:`save_checkpoint`) are replaced atomically (``_persist.write_file_atomic``).

File I/O runs in a worker thread (``anyio.to_thread``).
"""

from __future__ import annotations

import builtins
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio.to_thread

from ..._persist import create_file_exclusive, write_file_atomic
from ...exceptions import ConfigError, RunError
from ._checkpoint import Checkpoint

__all__ = [
    "CheckpointInfo",
    "CheckpointManager",
    "load_checkpoint",
    "load_context",
    "save_checkpoint",
    "save_context",
]

_LAST = ".cp_last"


@dataclass(frozen=True, slots=True)
class CheckpointInfo:
    """A checkpoint file and what its header says."""

    number: int
    path: Path
    timestamp: float
    description: str
    version: str


class CheckpointManager:
    """Numbered checkpoints of one agent in ``directory`` (created if missing).

    Args:
        directory: Where the files go.
        max_checkpoints: How many files to keep (``None``: all).
        prefix: File name prefix (``cp_`` gives ``cp_001.json``).

    Raises:
        ConfigError: For a bad ``max_checkpoints`` or ``prefix``.
    """

    def __init__(
        self, directory: str | Path, max_checkpoints: int | None = 5, *, prefix: str = "cp_"
    ) -> None:
        if max_checkpoints is not None and max_checkpoints < 1:
            raise ConfigError(f"max_checkpoints must be at least 1, got {max_checkpoints}")
        if not re.fullmatch(r"[A-Za-z0-9_\-]+", prefix):
            raise ConfigError(f"invalid checkpoint file prefix {prefix!r}")
        self.directory = Path(directory)
        self.max_checkpoints = max_checkpoints
        self.prefix = prefix
        self._pattern = re.compile(rf"{re.escape(prefix)}(\d+)\.json")

    def path_of(self, number: int) -> Path:
        """The file of checkpoint ``number``."""
        return self.directory / f"{self.prefix}{number:03d}.json"

    async def save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        """Write ``checkpoint`` under the next number, then prune old files.

        Raises:
            RunError: If the file cannot be written.
        """
        return await anyio.to_thread.run_sync(self._save, checkpoint)

    async def list(self) -> builtins.list[CheckpointInfo]:
        """The checkpoints, oldest first (a file that cannot be read is skipped).

        Raises:
            RunError: If the directory cannot be read.
        """
        return await anyio.to_thread.run_sync(self._list)

    async def latest(self) -> Checkpoint | None:
        """The newest checkpoint, or ``None``.

        Raises:
            ConfigError: If it cannot be loaded (see :meth:`load`).
        """
        numbers = await anyio.to_thread.run_sync(self._numbers)
        return await self.load(numbers[-1]) if numbers else None

    async def load(self, number: int | None = None) -> Checkpoint:
        """Checkpoint ``number`` (the newest when ``None``), version rules applied.

        Raises:
            ConfigError: If there is no such checkpoint, or it is malformed or of another
                major version.
        """
        return await anyio.to_thread.run_sync(self._load, number)

    async def rollback(self) -> Checkpoint | None:
        """Delete the newest checkpoint and return the one before it (``None`` if none is left).

        Raises:
            ConfigError: If the one before cannot be loaded.
            RunError: If the newest cannot be deleted.
        """
        return await anyio.to_thread.run_sync(self._rollback)

    # -- blocking implementation -------------------------------------------------------------

    def _numbers(self) -> builtins.list[int]:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise RunError(f"cannot list checkpoints in {str(self.directory)!r}: {exc}") from exc
        found = (self._pattern.fullmatch(n) for n in names)
        return sorted(int(m.group(1)) for m in found if m is not None)

    def _high_water(self) -> int:
        try:
            return int((self.directory / _LAST).read_text().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _raise_high_water(self, number: int) -> None:
        if number > self._high_water():
            write_file_atomic(self.directory / _LAST, str(number))

    def _free_names(self) -> Iterator[str]:
        # Read lazily, once the text is on disk: the next number after the highest file and the
        # high-water mark, then on (a name another process took meanwhile is skipped, never
        # overwritten).
        numbers = self._numbers()
        number = max(numbers[-1] if numbers else 0, self._high_water()) + 1
        while True:
            yield self.path_of(number).name
            number += 1

    def _save(self, checkpoint: Checkpoint) -> CheckpointInfo:
        text = checkpoint.to_json()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            name = create_file_exclusive(self.directory, self._free_names(), text)
            number = int(name[len(self.prefix) : -len(".json")])
            self._raise_high_water(number)
            self._prune()
        except OSError as exc:
            raise RunError(f"cannot save checkpoint in {str(self.directory)!r}: {exc}") from exc
        return CheckpointInfo(
            number,
            self.path_of(number),
            checkpoint.timestamp,
            checkpoint.description,
            checkpoint.version,
        )

    def _prune(self) -> None:
        if self.max_checkpoints is None:
            return
        numbers = self._numbers()
        for number in numbers[: max(0, len(numbers) - self.max_checkpoints)]:
            self.path_of(number).unlink(missing_ok=True)

    def _list(self) -> builtins.list[CheckpointInfo]:
        infos = []
        for number in self._numbers():
            header = _header(self.path_of(number))
            if header is not None:  # else deleted meanwhile, or not JSON
                infos.append(CheckpointInfo(number, self.path_of(number), *header))
        return infos

    def _load(self, number: int | None) -> Checkpoint:
        if number is None:
            numbers = self._numbers()
            if not numbers:
                raise ConfigError(f"no checkpoint in {str(self.directory)!r}")
            number = numbers[-1]
        return _read(self.path_of(number))

    def _rollback(self) -> Checkpoint | None:
        numbers = self._numbers()
        if not numbers:
            return None
        try:
            self.path_of(numbers[-1]).unlink(missing_ok=True)
        except OSError as exc:
            raise RunError(f"cannot delete checkpoint {numbers[-1]}: {exc}") from exc
        return self._load(numbers[-2]) if len(numbers) > 1 else None

    def __repr__(self) -> str:
        return f"CheckpointManager({str(self.directory)!r}, {self.max_checkpoints})"


def _read(path: Path) -> Checkpoint:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read checkpoint {str(path)!r}: {exc}") from exc
    try:
        return Checkpoint.from_json(text)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _header(path: Path) -> tuple[float, str, str] | None:
    """Timestamp, description and version of a checkpoint file, without the version rules."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    try:
        timestamp = float(data.get("timestamp") or 0.0)
    except (TypeError, ValueError):
        timestamp = 0.0
    return timestamp, str(data.get("description", "")), str(data.get("version", ""))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file_atomic(path, text)


async def save_checkpoint(checkpoint: Checkpoint, path: str | Path) -> None:
    """Write ``checkpoint`` to ``path``, replacing it atomically.

    Raises:
        RunError: If the file cannot be written.
    """
    try:
        await anyio.to_thread.run_sync(_write, Path(path), checkpoint.to_json())
    except OSError as exc:
        raise RunError(f"cannot save checkpoint {str(path)!r}: {exc}") from exc


async def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read the checkpoint at ``path``, version rules applied.

    Raises:
        ConfigError: If it cannot be read, is malformed or of another major version.
    """
    return await anyio.to_thread.run_sync(_read, Path(path))


async def save_context(
    path: str | Path, *, last_input: str | None = None, **pieces: Any
) -> Checkpoint:
    """The seed's ``save_context(ctx, path, last_input=...)`` (§20.5): capture a checkpoint of
    ``pieces`` (the keyword arguments of :meth:`Checkpoint.capture`: ``history``, ``memory``,
    ``self_reference``, ``recorder``, ``shared_memories`` ...) and write it to ``path``.

    Returns:
        The checkpoint written.

    Raises:
        InvalidHistoryError: If ``history`` is not a valid history.
        RunError: If a store fails or the file cannot be written.
    """
    checkpoint = await Checkpoint.capture(last_input=last_input, **pieces)
    await save_checkpoint(checkpoint, path)
    return checkpoint


load_context = load_checkpoint
"""The seed's ``load_context(path)`` (§20.5): :func:`load_checkpoint`."""
