"""FileToolset on real temp directories: reads, edits, stale writes, attacks, races, grep."""

from __future__ import annotations

import os
import random
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from simplellmfunc._content import ImgPath
from simplellmfunc.builtin import FileToolset
from simplellmfunc.builtin.files import GrepLimits, ReadLimits
from simplellmfunc.exceptions import WorkspaceError
from simplellmfunc.tools import ArgumentsError, Tool


@pytest.fixture(autouse=True)
def _no_fd_leak() -> Iterator[None]:
    before = len(os.listdir("/proc/self/fd"))
    yield
    assert len(os.listdir("/proc/self/fd")) <= before


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("import os\n\n\ndef main():\n    return 1\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOKEN=hunter2\n")
    return root


@pytest.fixture
def files(ws: Path) -> FileToolset:
    return FileToolset(ws)


def tools(fs: FileToolset) -> dict[str, Tool]:
    return {t.name: t for t in fs.toolset}


async def call(fs: FileToolset, name: str, **kwargs: Any) -> Any:
    return await tools(fs)[name](**kwargs)


def test_toolset_shape(files: FileToolset) -> None:
    names = [t.name for t in files.toolset]
    assert names == ["read_file", "read_image", "grep", "sed", "echo_into"]
    assert files.toolset is not files.toolset  # a fresh list each time
    read = tools(files)["read_file"]
    assert "<n> | <text>" in read.description
    assert "\n" not in read.description
    assert read.parameters["required"] == ["path"]
    assert "read_file" in tools(files)["sed"].description


# ---- read_file ----


async def test_read_file_numbered_via_invoke(files: FileToolset) -> None:
    out = await tools(files)["read_file"].invoke({"path": "src/app.py"})
    assert out.splitlines() == [
        "[src/app.py: lines 1-5 of 5]",
        "1 | import os",
        "2 | ",
        "3 | ",
        "4 | def main():",
        "5 |     return 1",
    ]


async def test_read_file_ranges(files: FileToolset) -> None:
    out = await call(files, "read_file", path="src/app.py", start_line=4, end_line=99)
    assert out.splitlines()[1:] == ["4 | def main():", "5 |     return 1"]
    out = await call(files, "read_file", path="src/app.py", start_line=2, end_line=2)
    assert out.splitlines() == ["[src/app.py: lines 2-2 of 5]", "2 | "]
    with pytest.raises(WorkspaceError, match=r"past the end.*5 lines"):
        await call(files, "read_file", path="src/app.py", start_line=6)
    with pytest.raises(WorkspaceError, match="must not be smaller"):
        await call(files, "read_file", path="src/app.py", start_line=3, end_line=2)
    with pytest.raises(ArgumentsError):
        await tools(files)["read_file"].invoke({"path": "src/app.py", "start_line": 0})


async def test_read_file_errors(files: FileToolset, ws: Path) -> None:
    with pytest.raises(WorkspaceError, match="not found"):
        await call(files, "read_file", path="nope.txt")
    with pytest.raises(WorkspaceError, match="directory"):
        await call(files, "read_file", path="src")
    (ws / "empty.txt").write_text("")
    assert "empty file" in await call(files, "read_file", path="empty.txt")


async def test_read_file_binary_refused(files: FileToolset, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"ELF\x00\x01\x02" + bytes(range(256)))
    with pytest.raises(WorkspaceError, match="binary"):
        await call(files, "read_file", path="blob.bin")


async def test_read_file_non_utf8_flagged(files: FileToolset, ws: Path) -> None:
    (ws / "latin.txt").write_bytes("caf\xe9\nok\n".encode("latin-1"))
    out = await call(files, "read_file", path="latin.txt")
    assert "1 | caf\ufffd" in out
    assert "not valid UTF-8" in out


async def test_read_file_crlf(files: FileToolset, ws: Path) -> None:
    (ws / "win.txt").write_bytes(b"one\r\ntwo\r\n")
    out = await call(files, "read_file", path="win.txt")
    assert "1 | one\n2 | two" in out
    assert "CRLF" in out


async def test_huge_file_needs_range(files: FileToolset, ws: Path) -> None:
    (ws / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 5001)))
    with pytest.raises(WorkspaceError, match="5000 lines") as exc:
        await call(files, "read_file", path="big.txt")
    assert "start_line" in str(exc.value)
    out = await call(files, "read_file", path="big.txt", start_line=1, end_line=5000)
    lines = out.splitlines()
    assert lines[1] == "1 | line 1"
    assert lines[2000] == "2000 | line 2000"
    assert "continue with start_line=2001" in lines[-1]
    out = await call(files, "read_file", path="big.txt", start_line=4999)
    assert out.splitlines()[1:] == ["4999 | line 4999", "5000 | line 5000"]


async def test_large_bytes_need_range_and_output_is_bounded(ws: Path) -> None:
    limits = ReadLimits(whole_bytes=1000, bytes_per_read=500)
    fs = FileToolset(ws, read_limits=limits)
    (ws / "wide.txt").write_text(("x" * 99 + "\n") * 20)
    with pytest.raises(WorkspaceError, match="20 lines"):
        await call(fs, "read_file", path="wide.txt")
    out = await call(fs, "read_file", path="wide.txt", start_line=1, end_line=20)
    assert "continue with start_line=6" in out
    (ws / "one.txt").write_text("y" * 2000)
    out = await call(fs, "read_file", path="one.txt", start_line=1)
    assert "line truncated: it has 2000 characters" in out


# ---- read_image ----


async def test_read_image_returns_high_detail_imgpath(files: FileToolset, ws: Path) -> None:
    Image.new("RGB", (2, 2), "red").save(ws / "pic.png")
    result = await tools(files)["read_image"].invoke({"path": "pic.png"})
    assert isinstance(result, ImgPath)
    assert result.detail == "high"
    assert result.path == files.workspace / "pic.png"
    assert result.to_data_url().startswith("data:image/png;base64,")


async def test_read_image_refusals(files: FileToolset, ws: Path, tmp_path: Path) -> None:
    (ws / "fake.png").write_text("not an image")
    with pytest.raises(WorkspaceError, match="not a PNG"):
        await call(files, "read_image", path="fake.png")
    Image.new("RGB", (2, 2)).save(ws / "pic.gif", format="GIF")
    os.rename(ws / "pic.gif", ws / "pic.jpg")
    with pytest.raises(WorkspaceError, match="rename"):
        await call(files, "read_image", path="pic.jpg")
    Image.new("RGB", (2, 2)).save(tmp_path / "outside" / "o.png")
    (ws / "o.png").symlink_to(tmp_path / "outside" / "o.png")
    with pytest.raises(WorkspaceError, match="outside"):
        await call(files, "read_image", path="o.png")


# ---- stale-write protection ----


async def test_sed_requires_read_then_applies(files: FileToolset, ws: Path) -> None:
    sed = tools(files)["sed"]
    args = {
        "path": "src/app.py",
        "start_line": 4,
        "end_line": 5,
        "pattern_to_be_replaced": r"return \d",
        "new_string": "return 2",
    }
    with pytest.raises(WorkspaceError, match="not been read"):
        await sed.invoke(args)
    await call(files, "read_file", path="src/app.py", start_line=1, end_line=1)
    out = await sed.invoke(args)
    assert out.splitlines() == [
        "Replaced 1 occurrence(s) in lines 4-5 of src/app.py. Lines 4-5 now read:",
        "4 | def main():",
        "5 |     return 2",
    ]
    assert (ws / "src" / "app.py").read_text().endswith("    return 2\n")
    # The toolset's own write refreshed the baseline: a second edit needs no re-read.
    await sed.invoke({**args, "pattern_to_be_replaced": "main", "new_string": "run"})
    assert "def run():" in (ws / "src" / "app.py").read_text()


async def test_external_change_refuses_writes(files: FileToolset, ws: Path) -> None:
    target = ws / "src" / "app.py"
    await call(files, "read_file", path="src/app.py")
    target.write_text(target.read_text() + "# edited by someone else\n")
    with pytest.raises(WorkspaceError, match=r"changed on disk.*read_file again"):
        await call(files, "sed", path="src/app.py", start_line=1, end_line=1,
                   pattern_to_be_replaced="os", new_string="sys")  # fmt: skip
    with pytest.raises(WorkspaceError, match="changed on disk"):
        await call(files, "echo_into", path="src/app.py", content="x")
    assert target.read_text().endswith("# edited by someone else\n")
    await call(files, "read_file", path="src/app.py", start_line=1, end_line=1)
    await call(files, "echo_into", path="src/app.py", content="x\n")
    assert target.read_text() == "x\n"


async def test_echo_into_create_and_overwrite(files: FileToolset, ws: Path) -> None:
    echo = tools(files)["echo_into"]
    out = await echo.invoke({"path": "docs/new/readme.md", "content": "# hi\nthere\n"})
    assert out == "Created docs/new/readme.md (2 lines, 11 bytes)."
    assert (ws / "docs" / "new" / "readme.md").read_text() == "# hi\nthere\n"
    # Written by the toolset itself: overwriting needs no read.
    out = await echo.invoke({"path": "docs/new/readme.md", "content": "bye"})
    assert out.startswith("Overwrote")
    with pytest.raises(WorkspaceError, match="not been read"):
        await echo.invoke({"path": "src/app.py", "content": ""})
    with pytest.raises(WorkspaceError, match="directory"):
        await echo.invoke({"path": "src", "content": ""})


async def test_toolsets_do_not_share_baselines(ws: Path) -> None:
    first, second = FileToolset(ws), FileToolset(ws)
    await call(first, "read_file", path="src/app.py")
    with pytest.raises(WorkspaceError, match="not been read"):
        await call(second, "echo_into", path="src/app.py", content="")


async def test_alias_paths_share_state(files: FileToolset, ws: Path) -> None:
    (ws / "alias.py").symlink_to(ws / "src" / "app.py")
    await call(files, "read_file", path="alias.py")
    await call(files, "echo_into", path=str(ws / "src" / "app.py"), content="z\n")
    assert (ws / "alias.py").is_symlink()
    assert (ws / "src" / "app.py").read_text() == "z\n"


# ---- sed details ----


async def test_sed_details(files: FileToolset, ws: Path) -> None:
    (ws / "f.txt").write_text("a1\na2\na3\na4\n")
    await call(files, "read_file", path="f.txt")
    out = await call(files, "sed", path="f.txt", start_line=2, end_line=3,
                     pattern_to_be_replaced="a", new_string="\\1")  # fmt: skip
    assert (ws / "f.txt").read_text() == "a1\n\\12\n\\13\na4\n"  # inserted literally
    assert "Replaced 2 occurrence(s)" in out
    out = await call(files, "sed", path="f.txt", start_line=1, end_line=1,
                     pattern_to_be_replaced="^a1$", new_string="x\ny")  # fmt: skip
    assert "Lines 1-2 now read:\n1 | x\n2 | y" in out
    assert "moved by +1" in out
    out = await call(files, "sed", path="f.txt", start_line=1, end_line=2,
                     pattern_to_be_replaced="zzz", new_string="q")  # fmt: skip
    assert "No match" in out
    with pytest.raises(WorkspaceError, match="invalid regular expression"):
        await call(files, "sed", path="f.txt", start_line=1, end_line=2,
                   pattern_to_be_replaced="(", new_string="q")  # fmt: skip
    with pytest.raises(WorkspaceError, match="past the end"):
        await call(files, "sed", path="f.txt", start_line=50, end_line=60,
                   pattern_to_be_replaced="a", new_string="q")  # fmt: skip
    # A range spanning lines: delete line 3 by matching its newline.
    await call(files, "sed", path="f.txt", start_line=2, end_line=3,
               pattern_to_be_replaced="y\n", new_string="")  # fmt: skip
    assert (ws / "f.txt").read_text() == "x\n\\12\n\\13\na4\n"


async def test_sed_keeps_undecodable_bytes_and_mode(files: FileToolset, ws: Path) -> None:
    target = ws / "legacy.sh"
    target.write_bytes(b"#!/bin/sh\necho caf\xe9\necho old\n")
    target.chmod(0o750)
    await call(files, "read_file", path="legacy.sh")
    await call(files, "sed", path="legacy.sh", start_line=3, end_line=3,
               pattern_to_be_replaced="old", new_string="new")  # fmt: skip
    assert target.read_bytes() == b"#!/bin/sh\necho caf\xe9\necho new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o750


async def test_sed_binary_refused(files: FileToolset, ws: Path) -> None:
    (ws / "b.dat").write_bytes(b"\x00\x01abc")
    with pytest.raises(WorkspaceError, match="binary"):
        await call(files, "sed", path="b.dat", start_line=1, end_line=1,
                   pattern_to_be_replaced="a", new_string="b")  # fmt: skip


async def test_concurrent_seds_are_serialised(files: FileToolset, ws: Path) -> None:
    target = ws / "many.txt"
    target.write_text("".join(f"line {i}: old\n" for i in range(1, 21)))
    await call(files, "read_file", path="many.txt")
    results: list[str] = []

    async def edit(i: int) -> None:
        results.append(await call(files, "sed", path="many.txt", start_line=i, end_line=i,
                                  pattern_to_be_replaced="old", new_string=f"new{i}"))  # fmt: skip

    async with anyio.create_task_group() as tg:
        for i in range(1, 21):
            tg.start_soon(edit, i)
    assert len(results) == 20
    assert all(r.startswith("Replaced 1 occurrence(s)") for r in results)
    assert target.read_text() == "".join(f"line {i}: new{i}\n" for i in range(1, 21))
    assert sorted(os.listdir(ws)) == ["many.txt", "src"]  # no temp files left


# ---- containment attacks through the tools ----


@pytest.mark.parametrize(
    "path",
    ["../outside/secret.txt", "src/../../outside/secret.txt", "/etc/passwd", "../ws-evil/x"],
)
async def test_tools_refuse_escapes(files: FileToolset, path: str) -> None:
    for name, kwargs in [
        ("read_file", {}),
        ("echo_into", {"content": "pwned"}),
        ("sed", {"start_line": 1, "end_line": 1, "pattern_to_be_replaced": "a", "new_string": "b"}),
    ]:
        with pytest.raises(WorkspaceError, match="outside the workspace"):
            await call(files, name, path=path, **kwargs)


async def test_sibling_prefix_directory(tmp_path: Path, files: FileToolset) -> None:
    (tmp_path / "ws-evil").mkdir()
    with pytest.raises(WorkspaceError, match="outside"):
        await call(files, "echo_into", path=str(tmp_path / "ws-evil" / "x"), content="x")
    assert not (tmp_path / "ws-evil" / "x").exists()


async def test_symlink_attacks(files: FileToolset, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (ws / "link_dir").symlink_to(outside)
    (ws / "link_file").symlink_to(outside / "secret.txt")
    (ws / "hop1").symlink_to("hop2")
    (ws / "hop2").symlink_to("src/../link_dir")
    attempts = [
        ("read_file", "link_file", {}),
        ("read_file", "link_dir/secret.txt", {}),
        ("read_file", "hop1/secret.txt", {}),
        ("echo_into", "link_dir/new.txt", {"content": "x"}),
        ("echo_into", "hop1/deeper/new.txt", {"content": "x"}),
        ("echo_into", "link_file", {"content": "x"}),
    ]
    for name, path, kwargs in attempts:
        with pytest.raises(WorkspaceError, match="outside"):
            await call(files, name, path=path, **kwargs)
    assert os.listdir(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOKEN=hunter2\n"


def _flip(ws: Path, outside: Path, stop: threading.Event) -> None:
    """Flip ``ws/d`` between a real directory and a symlink to ``outside`` until stopped."""
    target, n, pause = ws / "d", 0, random.Random(7)
    while not stop.is_set():
        n += 1
        try:
            if target.is_dir() and not target.is_symlink():
                os.rename(target, ws / f"moved{n}")
            os.symlink(outside, ws / "d.new")
            os.replace(ws / "d.new", target)
        except OSError:
            pass
        time.sleep(pause.random() / 2000)  # let the writer run while d is a symlink...
        try:
            if target.is_symlink():
                target.unlink()
            target.mkdir()
        except OSError:
            pass
        time.sleep(pause.random() / 2000)  # ...and while it is a directory
    for leftover in (ws / "d.new", target):
        if leftover.is_symlink():
            leftover.unlink()


async def test_swap_race_never_writes_outside(files: FileToolset, ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    stop = threading.Event()
    flipper = threading.Thread(target=_flip, args=(ws, outside, stop))
    flipper.start()
    written = refused = 0
    try:
        for _ in range(400):
            try:
                await call(files, "echo_into", path="d/f.txt", content="payload\n")
                written += 1
            except WorkspaceError:
                refused += 1
    finally:
        stop.set()
        flipper.join()
    assert written + refused == 400
    assert os.listdir(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "TOKEN=hunter2\n"


# ---- grep ----


@pytest.fixture
def tree(ws: Path, tmp_path: Path) -> Path:
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n# TODO: fix\ndef helper():\n    pass\n")
    (ws / "README.md").write_text("Project\nTODO: write docs\n")
    (ws / "notes.txt").write_text("naïve TODO café\n")
    for hidden in (".git", "node_modules", "__pycache__", ".venv", ".cache"):
        (ws / hidden).mkdir()
        (ws / hidden / "h.py").write_text("TODO hidden\n")
    (ws / "img.bin").write_bytes(b"\x00TODO binary")
    (tmp_path / "outside" / "leak.py").write_text("TODO outside\n")
    (ws / "link_out").symlink_to(tmp_path / "outside")
    (ws / "link_file.py").symlink_to(tmp_path / "outside" / "leak.py")
    return ws


async def test_grep_basic_via_invoke(files: FileToolset, tree: Path) -> None:
    out = await tools(files)["grep"].invoke({"pattern": "TODO"})
    lines = out.splitlines()
    assert lines[0] == "3 match(es) in 3 file(s) (5 searched, path_pattern '**'):"
    assert lines[1:4] == [
        "README.md:2: TODO: write docs",
        "notes.txt:1: naïve TODO café",
        "src/pkg/mod.py:2: # TODO: fix",
    ]
    assert "skipped 1 binary file(s)" in out
    assert "hidden" not in out
    assert "outside" not in out


async def test_grep_path_patterns(files: FileToolset, tree: Path) -> None:
    out = await call(files, "grep", pattern="TODO", path_pattern="*.py")
    assert out.splitlines()[1:] == ["src/pkg/mod.py:2: # TODO: fix"]
    out = await call(files, "grep", pattern="TODO", path_pattern="src")
    assert "src/pkg/mod.py:2" in out
    out = await call(files, "grep", pattern="TODO", path_pattern="*.{md,txt}")
    assert out.splitlines()[1:] == ["README.md:2: TODO: write docs", "notes.txt:1: naïve TODO café"]
    out = await call(files, "grep", pattern="TODO", path_pattern=".git/**")
    assert out.splitlines()[1:] == [".git/h.py:1: TODO hidden"]
    out = await call(files, "grep", pattern="TODO", path_pattern="node_modules/*.py")
    assert "node_modules/h.py:1" in out
    out = await call(files, "grep", pattern="nothing-like-this", path_pattern="*.py")
    assert out.startswith("No matches")
    for bad in ("../outside/*", "/etc/*"):
        with pytest.raises(WorkspaceError):
            await call(files, "grep", pattern="x", path_pattern=bad)
    with pytest.raises(WorkspaceError, match="invalid regular expression"):
        await call(files, "grep", pattern="(unclosed")


async def test_grep_regex_semantics(files: FileToolset, tree: Path) -> None:
    out = await call(files, "grep", pattern=r"^def \w+\(\):$", path_pattern="*.py")
    assert out.splitlines()[1:] == ["src/app.py:4: def main():", "src/pkg/mod.py:3: def helper():"]
    out = await call(files, "grep", pattern=r"na\wve")  # Unicode \w in a non-ASCII file
    assert "notes.txt:1" in out
    out = await call(files, "grep", pattern="café")
    assert "notes.txt:1" in out
    out = await call(files, "grep", pattern="(?i)project", path_pattern="README.md")
    assert out.splitlines()[1:] == ["README.md:1: Project"]
    out = await call(files, "grep", pattern=r"\N{LATIN SMALL LETTER E WITH ACUTE}")
    assert "notes.txt:1" in out


async def test_grep_bounds(ws: Path) -> None:
    fs = FileToolset(ws, grep_limits=GrepLimits(max_matches=5, max_line_chars=40))
    (ws / "many.txt").write_text("hit\n" * 50)
    (ws / "long.txt").write_text("a" * 500 + "NEEDLE" + "b" * 500 + "\n")
    out = await call(fs, "grep", pattern="hit")
    assert out.count("many.txt:") == 5
    assert "stopped at 5 matches" in out
    out = await call(fs, "grep", pattern="NEEDLE")
    line = out.splitlines()[1]
    assert "NEEDLE" in line
    assert "[line has 1006 chars]" in line
    assert len(line) < 120


async def test_grep_line_numbers_and_empty_matches(files: FileToolset, ws: Path) -> None:
    (ws / "n.txt").write_text("a\nb\n\nc\n")
    out = await call(files, "grep", pattern="^$", path_pattern="n.txt")
    assert out.splitlines()[1:] == ["n.txt:3: "]
    out = await call(files, "grep", pattern="c", path_pattern="n.txt")
    assert out.splitlines()[1:] == ["n.txt:4: c"]
