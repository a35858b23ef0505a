"""``FileToolset``: workspace-scoped file tools with stale-write protection.

Each tool call makes one hop to a worker thread for its file work (writes make a second, short
one first to resolve the path and pick the per-file lock). Refusals raise
:class:`~simplellmfunc.exceptions.WorkspaceError` with a message the model can act on; inside a
run the engine turns it into the tool result.

State (content hashes of files read, per-file locks) belongs to one ``FileToolset`` instance;
the tools are bound methods, so two toolsets never share it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
import anyio.to_thread
from pydantic import Field

from ..._content import ImgPath
from ..._persist import atomic_write
from ...exceptions import WorkspaceError
from ...tools import ApprovalFlag, Tool, parse_docstring
from ._grep import GrepLimits, grep_workspace
from ._image import load_image
from ._paths import (
    SECRET_PATTERNS,
    WorkspacePath,
    open_dir,
    open_regular,
    read_fd,
    refuse_os_errors,
    resolve_path,
    resolve_root,
)
from ._text import ReadLimits, apply_sed, count_lines, digest, is_binary, render_range

__all__ = ["STALE_FILE_MESSAGE", "FileToolset"]

#: The end of every stale-write refusal (SimpleLLMFunc's ``STALE_FILE_MESSAGE``).
STALE_FILE_MESSAGE = (
    "Call read_file again to see the current content (any line range), then redo the change."
)

LineNumber = Annotated[int, Field(ge=1)]


def _description(method: Callable[..., Any]) -> str:
    """The docstring's description as one paragraph (models need no hard line wraps)."""
    return " ".join(parse_docstring(method.__doc__).description.split())


class FileToolset:
    """Five file tools scoped to one workspace directory.

    Paths are relative to the workspace; absolute paths are accepted when they resolve inside
    it. Anything resolving outside (``..``, symlinks, prefix-sharing siblings) is refused.
    Writing an existing file requires a prior ``read_file`` of it in this toolset, and is
    refused if the file changed on disk since that read.

    Args:
        workspace: The directory the tools may use; it must exist.
        read_limits: Bounds on reads and edits.
        grep_limits: Bounds on grep results.
        protected: Names no tool opens, reads, searches or writes, matched case-insensitively
            against every path component: by default ``SECRET_PATTERNS`` (``.env``,
            ``.env.*``, keys and certificates, ``.ssh``, ``.aws``, ``.netrc`` ...); ``()`` turns
            the check off.
        requires_approval: The writing tools (``sed``, ``echo_into``) wait for a person's
            approval before each call: ``True``, or a callable over the call's arguments (see
            ``docs/human-in-the-loop.md``); reads never ask.

    Raises:
        ArgumentValueError: If ``workspace`` is not an existing directory (a ``UserError`` and
            a ``ValueError``).
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        read_limits: ReadLimits | None = None,
        grep_limits: GrepLimits | None = None,
        protected: Sequence[str] = SECRET_PATTERNS,
        requires_approval: ApprovalFlag = False,
    ) -> None:
        self.workspace: Path = resolve_root(workspace)
        self.protected: tuple[str, ...] = tuple(p.lower() for p in protected)
        self._read_limits = read_limits or ReadLimits()
        self._grep_limits = grep_limits or GrepLimits()
        self._baselines: dict[str, bytes] = {}
        self._locks: dict[str, anyio.Lock] = {}
        methods = (self.read_file, self.read_image, self.grep, self.sed, self.echo_into)
        writes = (self.sed, self.echo_into)
        self._tools = tuple(
            Tool(
                m.__name__,
                _description(m),
                m,
                requires_approval=requires_approval if m in writes else False,
            )
            for m in methods
        )

    @property
    def toolset(self) -> list[Tool]:
        """The tools, to pass as ``toolkit=``: read_file, read_image, grep, sed, echo_into."""
        return list(self._tools)

    def __repr__(self) -> str:
        return f"FileToolset({str(self.workspace)!r})"

    # ---- model-facing tools (their docstrings are the descriptions the model reads) ----

    async def read_file(
        self, path: str, start_line: LineNumber | None = None, end_line: LineNumber | None = None
    ) -> str:
        """Read a text file of the workspace. Every line comes back as `<n> | <text>`, where
        `<n>` is the 1-based line number; the `<n> | ` prefix is not part of the file. A header
        line `[path: lines a-b of total]` comes first. Files over 2000 lines or 256 KB need
        start_line/end_line; one call returns at most 2000 lines / 100 KB, and says where to
        continue. Reading a file (any range) is required before sed or echo_into may change it.
        Binary files are refused; invalid UTF-8 is shown as U+FFFD and flagged.

        Args:
            path: File path relative to the workspace root (e.g. `src/app.py`).
            start_line: First line to show (1-based, inclusive); default 1.
            end_line: Last line to show (inclusive); default the end of the file.

        Raises:
            WorkspaceError: If the path is outside the workspace, missing, binary, too large to
                read without a range, or the range is past the end.
        """
        return await anyio.to_thread.run_sync(self._read_file_sync, path, start_line, end_line)

    async def read_image(self, path: str) -> ImgPath:
        """Look at an image file of the workspace (PNG, JPEG, GIF or WebP, at most 20 MB); it
        is shown to you as an image in high detail.

        Args:
            path: Image path relative to the workspace root.

        Raises:
            WorkspaceError: If the path is outside the workspace, missing or not a supported
                image.
        """
        return await anyio.to_thread.run_sync(load_image, self.workspace, path, self.protected)

    async def grep(self, pattern: str, path_pattern: str = "**") -> str:
        """Search the workspace's files for a regular expression (Python `re` syntax, matched
        line by line, `^`/`$` at line boundaries). Results are `path:<line>: <text>`, sorted
        by path, at most 200 matches (the output says when it stopped early); long lines are
        shortened around the match. Binary files, symlinks and directories such as `.git`,
        `node_modules`, `__pycache__`, `.venv` and other dot-directories are skipped unless
        path_pattern names them.

        Args:
            pattern: Regular expression to find, e.g. `def \\w+\\(` or `TODO|FIXME`.
            path_pattern: Which files to search, as a glob relative to the workspace root: `*`
                stays within one directory, `**` spans directories, `{a,b}` gives alternatives.
                A pattern without `/` matches file names at any depth (`*.py`); with `/` it
                matches the whole path (`src/**/*.py`); a directory name searches everything
                below it. Default `**`: every file.

        Raises:
            WorkspaceError: For an invalid regex or a path_pattern outside the workspace.
        """
        return await anyio.to_thread.run_sync(
            grep_workspace,
            self.workspace,
            pattern,
            path_pattern,
            self._grep_limits,
            self.protected,
        )

    async def sed(
        self,
        path: str,
        start_line: LineNumber,
        end_line: LineNumber,
        pattern_to_be_replaced: str,
        new_string: str,
    ) -> str:
        """Edit a file: replace every match of a regular expression (Python `re` syntax,
        `^`/`$` at line boundaries) within lines start_line..end_line (inclusive, numbers as
        shown by read_file) with new_string, and show the changed lines. new_string is
        inserted literally (no backreferences); it may contain newlines. The range is joined
        with `\\n` before matching, so a pattern may span lines inside it. Read the file with
        read_file first; if it changed on disk since, the edit is refused and you must re-read.

        Args:
            path: File path relative to the workspace root.
            start_line: First line of the range (1-based).
            end_line: Last line of the range (inclusive).
            pattern_to_be_replaced: Regular expression to replace inside the range.
            new_string: Literal replacement text.

        Raises:
            WorkspaceError: If the file is outside the workspace, missing, unread or changed
                since read, binary, or the regex or range is invalid.
        """
        wp = await self._resolve(path)
        async with self._lock(wp):
            return await anyio.to_thread.run_sync(
                self._sed_sync, wp, (start_line, end_line), pattern_to_be_replaced, new_string
            )

    async def echo_into(self, path: str, content: str) -> str:
        """Write content to a file, replacing all of it (or creating it, with any missing
        parent directories). Overwriting an existing file requires reading it with read_file
        first, and is refused if it changed on disk since; creating a new file does not.
        Prefer sed for small edits of large files.

        Args:
            path: File path relative to the workspace root.
            content: The complete new file content (UTF-8 text).

        Raises:
            WorkspaceError: If the path is outside the workspace or a directory, or the file
                exists and was not read, or changed since it was read.
        """
        wp = await self._resolve(path)
        async with self._lock(wp):
            return await anyio.to_thread.run_sync(self._echo_into_sync, wp, content)

    # ---- worker-thread parts ----

    async def _resolve(self, path: str) -> WorkspacePath:
        return await anyio.to_thread.run_sync(resolve_path, self.workspace, path, self.protected)

    def _lock(self, wp: WorkspacePath) -> anyio.Lock:
        lock = self._locks.get(wp.key)
        if lock is None:
            lock = self._locks[wp.key] = anyio.Lock()
        return lock

    def _load(self, dir_fd: int, wp: WorkspacePath) -> tuple[bytes, int] | None:
        """Read the file (content and mode), or ``None`` if it does not exist."""
        opened = open_regular(dir_fd, wp)
        if opened is None:
            return None
        fd, st = opened
        try:
            if st.st_size > self._read_limits.max_file_bytes:
                raise WorkspaceError(
                    f"{wp.shown!r} is {st.st_size // (1024 * 1024)} MB, over the "
                    f"{self._read_limits.max_file_bytes // (1024 * 1024)} MB limit of the file "
                    "tools; use grep to search it"
                )
            return read_fd(fd, st.st_size), st.st_mode
        finally:
            os.close(fd)

    def _load_text(self, dir_fd: int, wp: WorkspacePath) -> tuple[bytes, int]:
        loaded = self._load(dir_fd, wp)
        if loaded is None:
            raise WorkspaceError(f"file not found: {wp.shown!r}")
        if is_binary(loaded[0]):
            raise WorkspaceError(
                f"{wp.shown!r} is a binary file ({len(loaded[0])} bytes); the text tools do not "
                "handle it (use read_image for images)"
            )
        return loaded

    def _check_fresh(self, wp: WorkspacePath, data: bytes) -> None:
        baseline = self._baselines.get(wp.key)
        if baseline is None:
            raise WorkspaceError(
                f"{wp.shown!r} exists but has not been read with read_file yet. "
                + STALE_FILE_MESSAGE
            )
        if baseline != digest(data):
            raise WorkspaceError(
                f"{wp.shown!r} changed on disk since you last read it; the write was refused. "
                f"{STALE_FILE_MESSAGE}"
            )

    @refuse_os_errors
    def _read_file_sync(self, path: str, start: int | None, end: int | None) -> str:
        wp = resolve_path(self.workspace, path, self.protected)
        with open_dir(wp) as dir_fd:
            data, _mode = self._load_text(dir_fd, wp)
        rendered = render_range(data, wp.shown, start, end, self._read_limits)
        self._baselines[wp.key] = digest(data)
        return rendered

    @refuse_os_errors
    def _sed_sync(
        self, wp: WorkspacePath, span: tuple[int, int], pattern: str, new_string: str
    ) -> str:
        with open_dir(wp) as dir_fd:
            data, mode = self._load_text(dir_fd, wp)
            self._check_fresh(wp, data)
            limits = self._read_limits
            new_data, report = apply_sed(data, wp.shown, span, pattern, new_string, limits)
            if new_data is not None:
                atomic_write(dir_fd, wp.parts[-1], new_data, mode)
                self._baselines[wp.key] = digest(new_data)
        return report

    @refuse_os_errors
    def _echo_into_sync(self, wp: WorkspacePath, content: str) -> str:
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise WorkspaceError("content has characters that cannot be encoded as UTF-8") from None
        with open_dir(wp, create=True) as dir_fd:
            existing = self._load(dir_fd, wp)
            mode = None
            if existing is not None:
                self._check_fresh(wp, existing[0])
                mode = existing[1]
            atomic_write(dir_fd, wp.parts[-1], data, mode)
            self._baselines[wp.key] = digest(data)
        verb = "Created" if existing is None else "Overwrote"
        return f"{verb} {wp.shown} ({count_lines(data)} lines, {len(data)} bytes)."
