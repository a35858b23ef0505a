"""Workspace path resolution, symlink-safe opening, atomic writes and path globs (FileToolset)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simplellmfunc._persist import atomic_write
from simplellmfunc.builtin.files._glob import compile_glob
from simplellmfunc.builtin.files._paths import (
    WorkspacePath,
    open_dir,
    open_regular,
    resolve_path,
    resolve_root,
)
from simplellmfunc.exceptions import WorkspaceError


@pytest.fixture(autouse=True)
def _no_fd_leak() -> Iterator[None]:
    before = len(os.listdir("/proc/self/fd"))
    yield
    assert len(os.listdir("/proc/self/fd")) <= before


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace ``ws`` next to ``ws-evil`` (shared prefix) and ``outside``, with symlinks."""
    ws = tmp_path / "ws"
    outside = tmp_path / "outside"
    evil = tmp_path / "ws-evil"
    for d in (ws / "sub", outside, evil):
        d.mkdir(parents=True)
    (ws / "sub" / "a.txt").write_text("a\n")
    (outside / "secret.txt").write_text("secret\n")
    (evil / "x.txt").write_text("x\n")
    (ws / "out_dir").symlink_to(outside)
    (ws / "out_file").symlink_to(outside / "secret.txt")
    (ws / "in_link").symlink_to(ws / "sub" / "a.txt")
    (ws / "chain1").symlink_to(ws / "chain2")
    (ws / "chain2").symlink_to("out_dir")
    (ws / "dangling_out").symlink_to(outside / "nope.txt")
    (ws / "loop").symlink_to("loop")
    return resolve_root(ws), outside


def test_relative_and_dotdot_inside(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    assert resolve_path(ws, "sub/a.txt").parts == ("sub", "a.txt")
    assert resolve_path(ws, "sub/../sub/./a.txt").parts == ("sub", "a.txt")
    assert resolve_path(ws, "new/file.txt").shown == "new/file.txt"
    assert resolve_path(ws, ".").shown == "."


@pytest.mark.parametrize(
    "bad",
    [
        "../outside/secret.txt",
        "sub/../../outside/secret.txt",
        "../../../../../../etc/passwd",
        "../ws-evil/x.txt",
        "/etc/passwd",
        "out_dir/secret.txt",
        "out_dir/new_file.txt",
        "out_dir",
        "out_file",
        "chain1/secret.txt",
        "chain1/newdir/new.txt",
        "dangling_out",
    ],
)
def test_escapes_refused(layout: tuple[Path, Path], bad: str) -> None:
    ws, _ = layout
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        resolve_path(ws, bad)


def test_sibling_prefix_absolute_refused(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    with pytest.raises(WorkspaceError, match="outside"):
        resolve_path(ws, str(ws) + "-evil/x.txt")


def test_absolute_inside_accepted(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    assert resolve_path(ws, str(ws / "sub" / "a.txt")).parts == ("sub", "a.txt")


@pytest.mark.parametrize("bad", ["", "   ", "sub/a\x00.txt"])
def test_empty_and_nul_refused(layout: tuple[Path, Path], bad: str) -> None:
    ws, _ = layout
    with pytest.raises(WorkspaceError):
        resolve_path(ws, bad)


def test_symlink_inside_resolves_to_target(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    assert resolve_path(ws, "in_link").parts == ("sub", "a.txt")


def test_workspace_through_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    root = resolve_root(tmp_path / "alias")
    assert root == (tmp_path / "real").resolve()
    assert resolve_path(root, str(tmp_path / "alias" / "f")).parts == ("f",)


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not an existing directory"):
        resolve_root(tmp_path / "missing")


def test_symlink_loop_fails_at_open(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    wp = resolve_path(ws, "loop/x.txt")
    with pytest.raises(WorkspaceError, match="symlink"), open_dir(wp):
        pass


def test_swapped_directory_detected_by_walk(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    wp = resolve_path(ws, "sub/a.txt")  # checked while sub is a real directory
    os.rename(ws / "sub", ws / "sub_moved")
    (ws / "sub").symlink_to(outside)  # swapped in between check and use
    with pytest.raises(WorkspaceError, match="symlink"), open_dir(wp):
        pass


def test_swapped_file_not_followed(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    wp = resolve_path(ws, "sub/a.txt")
    (ws / "sub" / "a.txt").unlink()
    (ws / "sub" / "a.txt").symlink_to(outside / "secret.txt")
    with open_dir(wp) as dir_fd, pytest.raises(WorkspaceError, match="symlink"):
        open_regular(dir_fd, wp)


def test_open_regular_rejects_directories_and_fifos(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    os.mkfifo(ws / "fifo")
    for name in ("sub", "fifo"):
        wp = WorkspacePath(ws, (name,))
        with open_dir(wp) as dir_fd, pytest.raises(WorkspaceError):
            open_regular(dir_fd, wp)


def test_open_dir_creates_missing_parents(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    wp = resolve_path(ws, "x/y/z.txt")
    with open_dir(wp, create=True) as dir_fd:
        assert open_regular(dir_fd, wp) is None
    assert (ws / "x" / "y").is_dir()


# ---- atomic writes ----


def _entries(path: Path) -> set[str]:
    return {p.name for p in path.iterdir()}


def test_atomic_write_replaces_symlink_instead_of_following(layout: tuple[Path, Path]) -> None:
    ws, outside = layout
    before = (outside / "secret.txt").read_text()
    with open_dir(WorkspacePath(ws, ("out_file",))) as dir_fd:
        atomic_write(dir_fd, "out_file", b"new\n")
    assert not (ws / "out_file").is_symlink()
    assert (ws / "out_file").read_text() == "new\n"
    assert (outside / "secret.txt").read_text() == before


def test_atomic_write_keeps_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("old")
    target.chmod(0o751)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        atomic_write(fd, "script.sh", b"new", target.stat().st_mode)
        atomic_write(fd, "fresh.txt", b"x")
    finally:
        os.close(fd)
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert target.read_text() == "new"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((tmp_path / "fresh.txt").stat().st_mode) == 0o666 & ~umask
    assert _entries(tmp_path) == {"script.sh", "fresh.txt"}


def test_atomic_write_failure_cleans_up(tmp_path: Path) -> None:
    (tmp_path / "adir").mkdir()
    (tmp_path / "adir" / "keep").write_text("k")
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError):
            atomic_write(fd, "adir", b"x")
    finally:
        os.close(fd)
    assert _entries(tmp_path) == {"adir"}


# ---- property tests: resolution never escapes ----

_COMPONENTS = ["..", ".", "sub", "a.txt", "out_dir", "out_file", "in_link", "chain1", "x", ""]


@pytest.fixture(scope="module")
def prop_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("prop")
    ws, outside = base / "ws", base / "outside"
    (ws / "sub").mkdir(parents=True)
    outside.mkdir()
    (ws / "sub" / "a.txt").write_text("a")
    (ws / "out_dir").symlink_to(outside)
    (ws / "out_file").symlink_to(outside / "s")
    (ws / "in_link").symlink_to(ws / "sub")
    (ws / "chain1").symlink_to("in_link/../out_dir")
    return resolve_root(ws)


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.sampled_from(_COMPONENTS), min_size=1, max_size=8), absolute=st.booleans())
def test_property_resolution_stays_inside(prop_ws: Path, parts: list[str], absolute: bool) -> None:
    raw = "/".join(parts)
    if absolute:
        raw = f"{prop_ws}/{raw}"
    try:
        wp = resolve_path(prop_ws, raw)
    except WorkspaceError:
        return
    real = Path(os.path.realpath(wp.path))
    assert real.is_relative_to(prop_ws)
    assert ".." not in wp.parts
    assert real == wp.path  # the components hold no symlink at resolution time


# ---- globs ----


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("", "a/b/c.py", True),
        ("*", "a/b/c.py", True),
        ("**", "c.py", True),
        ("*.py", "c.py", True),
        ("*.py", "a/b/c.py", True),
        ("*.py", "a/b/c.pyi", False),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/x/a.py", False),
        ("src/**/*.py", "src/a.py", True),
        ("src/**/*.py", "src/x/y/a.py", True),
        ("src/**/*.py", "lib/a.py", False),
        ("src/**", "src/x/y/z", True),
        ("./src/*.py", "src/a.py", True),
        ("*.{ts,tsx}", "web/app.tsx", True),
        ("*.{ts,tsx}", "web/app.js", False),
        ("file?.txt", "file1.txt", True),
        ("file[0-9].txt", "d/file7.txt", True),
        ("file[!0-9].txt", "file7.txt", False),
        ("a+b(c).txt", "a+b(c).txt", True),
    ],
)
def test_glob_semantics(pattern: str, path: str, expected: bool) -> None:
    assert compile_glob(pattern).matches(path) is expected


def test_glob_base_and_literals() -> None:
    glob = compile_glob("src/pkg/**/*.py")
    assert glob.base == ("src", "pkg")
    assert {"src", "pkg"} <= glob.literals
    assert compile_glob(".github/**").literals >= {".github"}


@pytest.mark.parametrize("bad", ["/etc/*", "../*.py", "a/../../b", "x\x00"])
def test_glob_refuses_escapes(bad: str) -> None:
    with pytest.raises(WorkspaceError):
        compile_glob(bad)


_NAME = st.text(alphabet="abcXYZ019._-+()", min_size=1, max_size=6).filter(
    lambda s: s not in (".", "..")
)


@given(st.lists(_NAME, min_size=1, max_size=4))
def test_property_literal_glob_matches_itself(parts: list[str]) -> None:
    path = "/".join(parts)
    assert compile_glob(path).matches(path)
    assert compile_glob("**").matches(path)


@given(st.lists(_NAME, min_size=2, max_size=4))
def test_property_star_stays_in_one_component(parts: list[str]) -> None:
    path = "/".join(parts)
    assert compile_glob("*/*").matches(path) is (len(parts) == 2)


async def test_credential_files_are_refused_by_every_tool(tmp_path: Path) -> None:
    """A model cannot read, search, overwrite or alias (by symlink) a workspace's secrets."""
    from simplellmfunc.builtin.files import FileToolset

    (tmp_path / ".env").write_text("API_KEY=sk-secret\n")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "config").write_text("IdentityFile sk-secret\n")
    (tmp_path / "deploy.PEM").write_text("sk-secret\n")
    (tmp_path / "notes.txt").write_text("sk-secret is not here\n")
    (tmp_path / "alias.txt").symlink_to(tmp_path / ".env")
    files = FileToolset(tmp_path)
    for path in (".env", ".ssh/config", "deploy.PEM", "alias.txt", str(tmp_path / ".env")):
        with pytest.raises(WorkspaceError, match="protected"):
            await files.read_file(path)
    with pytest.raises(WorkspaceError, match="protected"):
        await files.echo_into(".env", "API_KEY=other\n")
    assert (tmp_path / ".env").read_text() == "API_KEY=sk-secret\n"
    found = await files.grep("sk-secret", "**")
    assert "notes.txt" in found
    assert ".env" not in found
    assert "deploy" not in found
    assert "protected" in await files.grep("sk-secret", ".env")
    # The application may open them on purpose.
    assert "API_KEY" in await FileToolset(tmp_path, protected=()).read_file(".env")
